"""`prefill_blocks`: Dynamo's potential prefill blocks, by hand."""

from __future__ import annotations

from scoring_helpers import P, call, decision, harness_with, load

from flowserve.policies.scoring.scorers.prefill_blocks import PrefillBlocks, blocks


def test_blocks_by_hand() -> None:
    assert blocks(1024, 16) == 64 and blocks(1025, 16) == 65 and blocks(0, 16) == 0


def test_queued_prompts_plus_the_uncached_part_of_the_calls() -> None:
    h, (a, b) = harness_with(["a", "b"])
    h.prefix_index.add(P, "a", 0.0)
    load(b, queued=2, tokens=160)
    cs = call(P + tuple(range(5000, 5024)))  # 1024 tokens, 1000 cached on a
    # a: 24 / 16 = 1.5; b: (2 × 160 + 1024) / 16 = 84
    assert PrefillBlocks().cost(decision(h, cs, [a, b])) == [1.5, 84.0]
