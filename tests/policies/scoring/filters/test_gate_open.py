"""`gate_open`: a free slot, nothing waiting, below the queue's batch limit."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with, load

from flowserve.policies.scoring.filters.gate_open import GateOpen, gate_open
from flowserve.types.specs import InstanceSpec


def test_gate_open_by_hand() -> None:
    assert gate_open(1, 0, 3, None) and gate_open(1, 0, 3, 4)
    assert not gate_open(1, 0, 4, 4)  # at the queue's limit
    assert not gate_open(0, 0, 0, None)  # no slot
    assert not gate_open(1, 2, 0, None)  # calls waiting ahead


def test_keeps_instances_that_would_start_the_call_now() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    load(a, queued=1)
    c.spec = InstanceSpec("c", "A100-80G", "llama-3.1-8b", max_inflight=2)
    load(c, running=2)
    d = decision(h, call(), [a, b, c])
    assert [GateOpen().keep(i, d) for i in (a, b, c)] == [False, True, False]
