"""Decode pipelining in the simulated engine: each part released at its last token."""

from __future__ import annotations

from flowserve.profiles import cost_model_for
from flowserve.sim.engine import SimEngine
from flowserve.types.events import CallFinished, CallProgress
from flowserve.types.specs import EngineParams
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b", 1)


def run(marks, other=False):
    eng = SimEngine("e", EngineParams(), COST, kv_capacity=10**6)
    events = eng.submit(LLMCall(1, 0, "x", "s", "wf", tuple(range(100)), 60, 60), 0.0, 60, marks)
    if other:
        events += eng.submit(LLMCall(2, 0, "y", "s", "wf", tuple(range(1000, 1200)), 30, 30), 0.0, 30)
    while eng.wake is not None:
        events += eng.advance(eng.wake)
    return events


def test_parts_are_released_in_order_at_their_token_before_the_end():
    events = run((20, 45, 60))
    prog = [e for e in events if isinstance(e, CallProgress)]
    done = next(e for e in events if isinstance(e, CallFinished) and e.call_id == 1)
    assert [(p.index, p.output_tokens) for p in prog] == [(0, 20), (1, 25), (2, 15)]
    assert prog[0].time < prog[1].time < done.time and prog[2].time == done.time
    # part 0 ends after 19 decode steps past the first token: ~19/59 of the decode time
    decode = done.time - done.first_token
    assert abs((prog[0].time - done.first_token) / decode - 19 / 59) < 0.05
    # marks cut stretches but do not change when the call completes
    plain = next(e for e in run(()) if isinstance(e, CallFinished) and e.call_id == 1)
    assert abs(plain.time - done.time) < 1e-9


def test_marks_with_other_sequences_in_the_batch():
    events = run((10, 59), other=True)
    prog = [e for e in events if isinstance(e, CallProgress)]
    assert [p.index for p in prog] == [0, 1] and all(p.call_id == 1 for p in prog)
