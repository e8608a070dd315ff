"""`active_blocks`: Dynamo's potential active blocks, by hand."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with, load

from flowserve.policies.scoring.scorers.active_blocks import ActiveBlocks


def test_blocks_of_every_call_in_flight_plus_its_own() -> None:
    h, (a, b) = harness_with(["a", "b"])
    load(a, queued=1, running=2, tokens=100)  # 3 calls × ⌈100 / 16⌉ = 21 blocks
    cs = call(tuple(range(1024)))  # 64 blocks
    assert ActiveBlocks().cost(decision(h, cs, [a, b])) == [85.0, 64.0]
    assert ActiveBlocks(block_size=64).cost(decision(h, cs, [a, b])) == [3 * 2 + 16.0, 16.0]  # ⌈100 / 64⌉ = 2
