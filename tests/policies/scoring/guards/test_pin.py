"""`pin`: a deadline-free call stays with its prefix's holder within (1 + w) × the pick's finish."""

from __future__ import annotations

from scoring_helpers import COST, call, decision, harness_with

from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.scoring.guards.pin import PinPrefix, pinned


def test_pinned_by_hand() -> None:
    assert pinned(3.0, 2.0, 1.5) and not pinned(3.1, 2.0, 1.5)


P = tuple(range(2000))


def test_pin_before_replicate_for_deadline_free_calls() -> None:
    h, (a, b) = harness_with(["a", "b"], FlowserveQueue)
    h.prefix_index.add(P, "a", 0.0)
    h.enqueue(call(tuple(range(10**6, 10**6 + 5000))), a)  # a owes an uncached 5000-token prefill first
    free_call = call(P + (9,))
    finish_a = COST.prefill_time(5000, 0) + h.view.t_comp(free_call, a)  # queued prefill, then its own tail
    finish_b = h.view.t_cold(free_call, b)  # idle b computes the whole prompt
    assert finish_b < finish_a < 2.0 * finish_b and finish_a > 1.5 * finish_b
    # w_free = 1: pinned while a finishes within (1 + 1) × b's finish
    loose = PinPrefix(w_free=1.0)
    assert loose.review(b, decision(h, free_call, [a, b])) is a and loose.stats == {"pinned": 1, "replicated": 0}
    # w_free = 0, but one of two instances has calls waiting (w = backlog 0.5): 1.5 < finish_a / finish_b
    tight = PinPrefix(w_free=0.0)
    assert tight.review(b, decision(h, call(P + (8,)), [a, b])) is b and tight.stats["replicated"] == 1
    # calls with a deadline keep the pick; a pick that holds the prefix is kept
    assert loose.review(b, decision(h, call(P + (6,), deadline=100.0), [a, b])) is b
    assert loose.review(a, decision(h, call(P + (5,)), [a, b])) is a
    assert loose.stats == {"pinned": 1, "replicated": 0}
