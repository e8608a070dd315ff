"""The core takes the engines' cache events: precise views from the block index, estimated otherwise."""

from __future__ import annotations

import dataclasses

from helpers import ScriptedDriver, ScriptProgram, live_spec, llm, make_core, query

from flowserve.core._kv import KVSettings
from flowserve.types.events import InstanceDown, InstanceUp, PrefixEvicted
from flowserve.types.kv import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvents,
    KVEventsSpec,
    KVViewChanged,
    SlotsResident,
)

PROMPT = tuple(range(100))  # llm("x", 100): 6 full blocks of 16 and a tail of 4


def kv_spec(name: str):
    return dataclasses.replace(live_spec(name), kv_events=KVEventsSpec("tcp://127.0.0.1:5557"))


def stored(t: float, n_blocks: int, inst: str = "a") -> KVCacheEvents:
    return KVCacheEvents(t, inst, (BlockStored(0, tuple(range(1, n_blocks + 1)), None, PROMPT[:16 * n_blocks], 16),))


def test_events_make_the_view_of_a_precise_instance() -> None:
    core = make_core([kv_spec("a"), live_spec("b")], "prefix_affinity", kv=KVSettings(speculative_ttl_s=5.0))
    assert [(v.instance, v.precise, v.reason) for v in core.kv_views()] == [("a", False, "no events yet")]
    d = ScriptedDriver(core)
    d.feed(KVViewChanged(0.0, "a", True, "followed from seq 0"))
    d.feed(stored(0.0, 4))
    assert core.prefix_hit(PROMPT, "a") == 64 and core.prefix_hit(PROMPT, "b") == 0
    d.feed(KVCacheEvents(0.5, "a", (BlockRemoved(0, (3,)),)))
    assert core.prefix_hit(PROMPT, "a") == 32
    d.feed(KVCacheEvents(0.6, "a", (AllBlocksCleared(0),)))
    assert core.prefix_hit(PROMPT, "a") == 0
    views = {v.instance: v for v in core.kv_views()}
    assert views["a"].precise and views["a"].blocks == 0
    size, stats = core.kv_index()  # type: ignore[misc]
    assert stats.stored == 4 and stats.removed == 1 and size == 0


def test_a_routed_prompt_is_speculative_until_confirmed() -> None:
    core = make_core([kv_spec("a")], "prefix_affinity", kv=KVSettings(speculative_ttl_s=5.0))
    d = ScriptedDriver(core)
    d.feed(KVViewChanged(0.0, "a", True, "ok"))
    d.arrive(query(ScriptProgram([llm("x", 100)])))
    assert core.prefix_hit(PROMPT, "a") == 96  # whole blocks only: engines cache no partial block
    d.feed(stored(1.0, 2))  # the engine confirms two blocks (the rest never made it)
    d.feed(PrefixEvicted(2.0, "a", PROMPT, 0))  # an estimate's eviction is ignored for a precise view
    assert core.prefix_hit(PROMPT, "a") == 96
    d.t = 5.0
    d.finish(next(iter(d.inflight)))  # a finished call adds nothing to a precise view
    d.feed(KVCacheEvents(11.5, "a", ()))  # a TTL after the call ended (at 6): the unconfirmed blocks lapse
    assert core.prefix_hit(PROMPT, "a") == 32


def test_an_estimated_instance_keeps_the_estimate_and_is_rebuilt_when_precise_again() -> None:
    core = make_core([kv_spec("a")], "prefix_affinity", kv=KVSettings(speculative_ttl_s=5.0))
    d = ScriptedDriver(core)
    d.feed(stored(0.0, 1))  # no view change yet: the events apply, routed prompts are the estimate
    d.arrive(query(ScriptProgram([llm("x", 100)])))
    d.feed(KVCacheEvents(60.0, "a", ()))
    assert core.prefix_hit(PROMPT, "a") == 100  # the estimate keeps the whole routed prompt
    d.feed(KVViewChanged(61.0, "a", True, "replayed"))
    assert core.prefix_hit(PROMPT, "a") == 16  # rebuilt from the index: only the stored block
    d.feed(KVViewChanged(62.0, "a", False, "gap not replayed"))
    assert not core.kv_views()[0].precise and core.kv_views()[0].reason == "gap not replayed"
    d.feed(InstanceDown(63.0, "a"))
    assert core.prefix_hit(PROMPT, "a") == 0
    d.feed(InstanceUp(64.0, kv_spec("a")))
    d.feed(KVViewChanged(65.0, "a", True, "resynced"))
    assert core.prefix_hit(PROMPT, "a") == 16


def test_without_event_instances_nothing_changes() -> None:
    core = make_core([live_spec("a")], "prefix_affinity")
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([llm("x", 100)])))
    d.feed(stored(1.0, 2))  # events for an instance that has none configured are ignored
    assert core.kv_views() == [] and core.kv_index() is None
    assert core.prefix_hit(PROMPT, "a") == 100


def test_routing_a_prompt_keeps_another_prompts_confirmed_blocks() -> None:
    """Two prompts share 96 tokens and the first token of their tails: routing the second must
    not drop the first one's confirmed block that starts where the second's partial tail does."""
    core = make_core([kv_spec("a")], "prefix_affinity", kv=KVSettings(speculative_ttl_s=5.0))
    d = ScriptedDriver(core)
    d.feed(KVViewChanged(0.0, "a", True, "ok"))
    first = tuple(range(112))  # 7 blocks
    d.feed(KVCacheEvents(0.0, "a", (BlockStored(0, tuple(range(1, 8)), None, first, 16),)))
    d.arrive(query(ScriptProgram([llm("x", 100)])))  # PROMPT: blocks 0-5 of `first`, then tokens 96..99
    assert core.prefix_hit(first, "a") == 112


def test_slots_top_an_estimated_instance_up_and_leave_a_precise_one_alone() -> None:
    core = make_core([kv_spec("a"), live_spec("b")], "prefix_affinity")
    d = ScriptedDriver(core)
    d.feed(KVViewChanged(0.0, "a", True, "ok"))
    d.feed(SlotsResident(1.0, "b", (PROMPT[:40], PROMPT[:70])))  # another client's prompts, in b's slots
    d.feed(SlotsResident(1.0, "a", (PROMPT,)))  # a's events say what it holds: slots add nothing
    assert core.prefix_hit(PROMPT, "b") == 70 and core.prefix_hit(PROMPT, "a") == 0
    views = {v.instance: v for v in core.kv_views()}
    assert not views["b"].precise and views["b"].slot_prompts == 2 and "slots" in views["b"].reason
    assert views["a"].precise and views["a"].slot_prompts == 1
    d.feed(PrefixEvicted(2.0, "b", PROMPT[:70], 40))  # still an estimate: its evictions apply
    assert core.prefix_hit(PROMPT, "b") == 40


def test_a_routed_prompt_stays_speculative_while_its_call_waits_on_the_instance() -> None:
    """Under load a call waits longer than the TTL: the router must not forget where it sent it."""
    core = make_core([kv_spec("a")], "prefix_affinity", kv=KVSettings(speculative_ttl_s=5.0))
    d = ScriptedDriver(core)
    d.feed(KVViewChanged(0.0, "a", True, "ok"))
    d.arrive(query(ScriptProgram([llm("x", 100)])))
    d.feed(KVCacheEvents(30.0, "a", ()))  # 30 s later, the call still queued or running: still there
    assert core.prefix_hit(PROMPT, "a") == 96
    d.t = 31.0
    d.finish(next(iter(d.inflight)))  # the call left, unconfirmed: lapses within a TTL
    d.feed(KVCacheEvents(36.1, "a", ()))
    assert core.prefix_hit(PROMPT, "a") == 0
