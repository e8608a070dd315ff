"""A simulated engine's LoRA slots: vLLM's rule of at most max_loras adapters per batch, the
LRU slot an adapter is loaded into, and the load the next iteration waits for."""

from __future__ import annotations

import pytest

from flowserve.profiles import cost_model_for
from flowserve.sim.adapter_slots import AdapterSlots
from flowserve.sim.engine import SimEngine
from flowserve.types.events import CallFinished
from flowserve.types.specs import EngineParams, LoraSpec
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b", 1)


def call(i: int, model: str | None, prompt: int = 64, out: int = 8) -> LLMCall:
    return LLMCall(i, 0, f"n{i}", "s", "wf", tuple((i << 20) + k for k in range(prompt)), out, out, model)


def test_slots_by_hand() -> None:
    slots = AdapterSlots(LoraSpec(("a", "b", "c"), max_loras=2, load_s=0.25))
    slots.admitted(call(1, "a"))
    slots.admitted(call(2, "b"))
    assert slots.owed == 0.5 and slots.loads == 2  # two loads the next iteration waits for
    slots.paid()
    assert not slots.admissible(call(3, "c"))  # a and b run: no slot for c
    assert slots.admissible(call(4, "a")) and slots.admissible(call(5, None))
    slots.admitted(call(4, "a"))
    assert slots.owed == 0.0  # a is in its slot
    slots.released(2)  # b's only call ends: b stays in its slot, unpinned
    assert slots.admissible(call(3, "c"))
    slots.admitted(call(3, "c"))
    assert list(slots.resident) == ["a", "c"] and slots.owed == 0.25  # c took b's slot, the LRU unpinned one


def run(engine: SimEngine, calls: list[tuple[float, LLMCall]]) -> dict[int, CallFinished]:
    done: dict[int, CallFinished] = {}
    pending = sorted(calls, key=lambda tc: (tc[0], tc[1].id))
    while pending or engine.wake is not None:
        if pending and (engine.wake is None or pending[0][0] <= engine.wake):
            t, c = pending.pop(0)
            events = engine.submit(c, t)
        else:
            events = engine.advance(engine.wake)
        done.update({e.call_id: e for e in events if isinstance(e, CallFinished)})
    return done


def test_a_load_delays_the_iteration_by_load_s() -> None:
    base = run(SimEngine("e", EngineParams(), COST, 10**6), [(0.0, call(1, "x"))])
    lora = EngineParams(lora=LoraSpec(("x",), max_loras=1, load_s=0.3))
    loaded = run(SimEngine("e", lora, COST, 10**6), [(0.0, call(1, "x"))])
    assert loaded[1].time == pytest.approx(base[1].time + 0.3)
    assert loaded[1].first_token == pytest.approx(base[1].first_token + 0.3)


def test_a_call_waits_for_a_slot_and_those_behind_it_go_first() -> None:
    params = EngineParams(lora=LoraSpec(("a", "b"), max_loras=1, load_s=0.0))
    engine = SimEngine("e", params, COST, 10**6)
    done = run(engine, [(0.0, call(1, "a", out=200)), (0.0, call(2, "b")), (0.0, call(3, "a")), (0.0, call(4, None))])
    # b needs a's slot: it starts only when a's last call ends; a's second call and the base model's overtake it
    assert done[2].started >= max(done[1].time, done[3].time) - 1e-9
    assert done[3].started < done[2].started and done[4].started < done[2].started
    assert engine.loras is not None and engine.loras.loads == 2


def test_without_adapters_nothing_changes() -> None:
    calls = [(0.1 * i, call(i, None, prompt=300, out=20)) for i in range(20)]
    plain = run(SimEngine("e", EngineParams(), COST, 10**6), calls)
    with_slots = run(SimEngine("e", EngineParams(lora=LoraSpec(("a",), 1, 1.0)), COST, 10**6), calls)
    assert {k: (v.time, v.started) for k, v in plain.items()} == {k: (v.time, v.started) for k, v in with_slots.items()}
