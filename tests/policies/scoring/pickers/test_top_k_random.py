"""`top_k_random`: uniformly among the k best, reproducibly by its seed."""

from __future__ import annotations

import pytest
from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.pickers.top_k_random import TopKRandom, top_k


def test_top_k_by_hand() -> None:
    assert top_k([0.1, 0.9, 0.5, 0.9], [0, 3, 0, 1], 2) == [3, 1]  # ties: fewer dispatched first
    assert top_k([0.1, 0.9], [0, 0], 5) == [1, 0]


def test_draws_only_among_the_k_best_and_repeats_with_its_seed() -> None:
    h, insts = harness_with(["a", "b", "c", "d"])
    d = decision(h, call(), insts)
    scores = [0.1, 0.9, 0.8, 0.2]
    picks = [TopKRandom(k=2, seed=7).pick(scores, d).name for _ in range(1)]
    drawn = {TopKRandom(k=2, seed=s).pick(scores, d).name for s in range(40)}
    assert drawn == {"b", "c"}
    again = TopKRandom(k=2, seed=7)
    assert [again.pick(scores, d).name for _ in range(1)] == picks
    one = TopKRandom(k=1, seed=3)
    assert {one.pick(scores, d).name for _ in range(10)} == {"b"}
    with pytest.raises(ValueError, match="k must be"):
        TopKRandom(k=0)
