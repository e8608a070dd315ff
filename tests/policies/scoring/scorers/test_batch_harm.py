"""`batch_harm`: what the call adds to the running calls' decode steps, by hand."""

from __future__ import annotations

import pytest
from scoring_helpers import COST, P, call, decision, harness_with, load

from flowserve.policies.scoring.scorers.batch_harm import BatchHarm, externality


def test_externality_by_hand() -> None:
    step = COST.decode_step_time
    # the 3 running calls each get 10 longer steps: batch 3 → 4, context 3000 → 3500
    assert externality(COST, 10, 500.0, 3, 3000.0) == pytest.approx(3 * 10 * (step(4, 3500.0) - step(3, 3000.0)))
    assert externality(COST, 0, 500.0, 3, 3000.0) == 0.0
    assert externality(COST, 10, 500.0, 0, 0.0) == 0.0


def test_only_instances_with_running_calls_are_harmed() -> None:
    h, (a, b) = harness_with(["a", "b"])
    load(a, running=3, tokens=1000)
    cs = call(P, out=11)
    [harm_a, harm_b] = BatchHarm().cost(decision(h, cs, [a, b]))
    ctx = a.queue.running_context(a)  # 3 × (1000 + 16 / 2)
    assert ctx == 3 * 1008.0
    assert harm_a == pytest.approx(externality(COST, 10, 1000 + 5.5, 3, ctx)) and harm_a > 0
    assert harm_b == 0.0
