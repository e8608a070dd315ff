"""flowserve's cache weight w = max(slack, pressure), by hand."""

from __future__ import annotations

import pytest
from scoring_helpers import call, decision, harness_with

from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.scoring.slack import SlackBook, backlog, slack_fraction
from flowserve.types.specs import InstanceSpec


def test_slack_fraction_by_hand() -> None:
    assert slack_fraction(10.0, 4.0) == 0.6  # (10 − 4) / 10
    assert slack_fraction(10.0, 12.0) == 0.0
    assert slack_fraction(-1.0, 1.0) == 0.0
    assert slack_fraction(10.0, 0.0) == 1.0


def test_occupancy_and_backlog_by_hand() -> None:
    _, (a, b) = harness_with(["a", "b"])
    for _ in range(64):  # a quarter of 256 sequence slots
        cs = call()
        a.running[cs.id] = cs
    assert occupancy(a) == 0.25 and occupancy(b) == 0.0
    a.kv_capacity, a.kv_free = 1000, 400
    assert occupancy(a) == 0.25  # the engine does not report KV: slots only
    a.spec = InstanceSpec("a", "A100-80G", "llama-3.1-8b", reports_capacity=True)
    assert occupancy(a) == 0.6  # 60% of the KV in use
    assert backlog([a, b]) == pytest.approx(0.3)  # mean occupancy (0.6 + 0) / 2
    b.queue.push(call())
    assert backlog([a, b]) == 0.5  # one of two instances has calls waiting


def test_slack_by_class_and_deadline() -> None:
    h, (a, b) = harness_with(["a", "b"])
    book = SlackBook(w_free=0.3)
    assert book.slack(call(cls="batch"), [a, b], h.view) == 1.0
    assert book.slack(call(), [a, b], h.view) == 0.3
    assert book.slack(call(deadline=1000.0), [a, b], h.view) > 0.99
    assert book.slack(call(deadline=0.01), [a, b], h.view) == 0.0
    b.queue.push(call())  # half the cluster has calls waiting: pressure 0.5 beats a tight deadline
    assert book.weight(decision(h, call(deadline=0.01), [a, b])) == 0.5
