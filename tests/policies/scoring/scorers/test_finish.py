"""`finish`: work ahead + batch slowdown + t_comp, by hand."""

from __future__ import annotations

import pytest
from scoring_helpers import COST, P, call, decision, harness_with

from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.scoring.scorers.finish import (
    ExpectedFinish,
    batch_slowdown,
    finishes,
    slot_wait,
    work_ahead,
)


def test_formulas_by_hand() -> None:
    step = COST.decode_step_time
    # 10 steps: each longer at batch 4 with 3000 + 500 tokens than alone with 500
    assert batch_slowdown(COST, 10, 500.0, 3, 3000.0) == pytest.approx(10 * (step(4, 3500.0) - step(1, 500.0)))
    assert batch_slowdown(COST, 10, 500.0, 0, 0.0) == 0.0
    assert slot_wait(3, 6, 2.0) == 1.0  # 3 excess × 2 s mean call / 6 running
    assert slot_wait(0, 6, 2.0) == 0.0 and slot_wait(3, 0, 2.0) == 0.0


def test_idle_instances_finish_in_their_t_comp() -> None:
    h, (a, b) = harness_with(["a", "b"], gpu={"b": "L4"})
    h.prefix_index.add(P, "a", 0.0)
    cs = call(P + (9,))
    d = decision(h, cs, [a, b])
    assert ExpectedFinish().cost(d) == [h.view.t_comp(cs, a), h.view.t_comp(cs, b)]
    assert h.view.t_comp(cs, a) < h.view.t_cold(cs, a) < h.view.t_comp(cs, b)  # a caches, b is slower


def test_serial_counts_the_outstanding_work_as_hexgen_t_queue() -> None:
    h, (a, b) = harness_with(["a", "b"])
    a.outstanding = 3.0  # running calls' predicted seconds, nothing queued
    cs = call()
    assert work_ahead(a, cs, 0.0, "serial") == 3.0
    d = decision(h, cs, [a, b])
    assert ExpectedFinish(wait_model="serial").cost(d) == [3.0 + h.view.t_comp(cs, a), h.view.t_comp(cs, b)]


def test_batched_wait_counts_prefill_ahead_and_the_running_batch() -> None:
    h, (a,) = harness_with(["a"], FlowserveQueue)
    queued = call()
    queued.instance = "a"
    a.queue.push(queued)  # not cached anywhere: its whole prompt's prefill
    running = [call(), call()]
    for cs in running:  # released through the queue, as the core does (after their prefill)
        cs.instance = "a"
        a.queue.push(cs)
        a.queue.remove(cs, released=True)
        a.running[cs.id] = cs
    a.outstanding = queued.t_comp + 3.0  # the running calls' predicted 3 s
    # queued prefill + the mean running call (1.5 s) × occupancy (2 of 256 slots); no slot wait (below the spot)
    expected = COST.prefill_time(len(P), 0) + 3.0 / 2 * 2 / 256
    new = call()
    assert work_ahead(a, new, 100.0) == pytest.approx(expected)
    # finish adds the slowdown of joining the 2 running calls and its own t_comp
    ctx = a.queue.running_context(a)
    slowdown = batch_slowdown(COST, new.predicted_output - 1, len(P) + new.predicted_output / 2, 2, ctx)
    [f] = finishes(decision(h, new, [a], 100.0))
    assert f == pytest.approx(expected + slowdown + h.view.t_comp(new, a))


def test_interactive_work_does_not_wait_for_batch_work_queued_ahead() -> None:
    _, (a,) = harness_with(["a"], FlowserveQueue)
    for _ in range(3):
        cs = call(cls="batch")
        cs.instance = "a"
        a.queue.push(cs)
        a.outstanding += cs.t_comp
    prefill = a.queue.waiting_prefill_s()
    assert work_ahead(a, call(), 0.0) == 0.0
    assert work_ahead(a, call(cls="batch"), 0.0) == pytest.approx(prefill)
    assert work_ahead(a, call(cls="batch"), 0.0, "serial") == pytest.approx(a.outstanding)


def test_refuses_an_unknown_wait_model() -> None:
    with pytest.raises(ValueError, match="wait_model"):
        ExpectedFinish(wait_model="parallel")  # type: ignore[arg-type]
