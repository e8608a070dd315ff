"""`prefix_hit`: whole cached blocks over the prompt's blocks, by hand."""

from __future__ import annotations

import pytest
from scoring_helpers import P, call, decision, harness_with

from flowserve.policies.scoring.scorers.prefix_hit import PrefixHit, block_hit


def test_block_hit_by_hand() -> None:
    assert block_hit(1000, 1024, 64) == 15 / 16  # 15 whole blocks of 16
    assert block_hit(63, 1024, 64) == 0.0
    assert block_hit(1023, 1024, 1) == 1023 / 1024
    assert block_hit(0, 0, 64) == 0.0


def test_scores_each_instance_by_what_the_index_says_it_caches() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    h.prefix_index.add(P, "a", 0.0)
    h.prefix_index.add(P[:512], "b", 0.0)
    cs = call(P + tuple(range(5000, 5024)))  # 1024 tokens
    assert PrefixHit(block_size=64).score(decision(h, cs, [a, b, c])) == [15 / 16, 8 / 16, 0.0]
    assert PrefixHit().score(decision(h, cs, [a, b, c])) == [1000 / 1024, 512 / 1024, 0.0]


def test_without_a_precise_view_confirmed_is_what_the_index_believes() -> None:
    h, (a, b) = harness_with(["a", "b"])
    h.prefix_index.add(P, "a", 0.0)
    cs = call(P + (7,))
    assert PrefixHit(speculative=False).score(decision(h, cs, [a, b])) == [1000 / 1001, 0.0]


def test_refuses_a_block_size_below_one() -> None:
    with pytest.raises(ValueError, match="block_size"):
        PrefixHit(block_size=0)
