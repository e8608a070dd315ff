"""llama-server's slots in the simulator: which slot a prompt lands in, the cached
tokens it gets there, eviction with and without --kv-unified and --cache-ram
(hand-computed cases following tools/server/server-context.cpp)."""

from dataclasses import replace

from flowserve.profiles import cost_model_for
from flowserve.profiles.fitted import FittedCostModel, load_profile
from flowserve.profiles.slot_config import SlotConfig, cache_ram_tokens
from flowserve.sim.engine import SimEngine
from flowserve.sim.slots import RamCache, Slot, SlotEngine, choose_slot, common_prefix, make_engine
from flowserve.types.events import CallFinished, PrefixEvicted
from flowserve.types.specs import EngineParams
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b", 1)
A, B, C = (tuple(range(k * 1000, k * 1000 + 100)) for k in (1, 2, 3))  # three 100-token documents


def call(i, prompt, out=4):
    return LLMCall(i, 0, f"n{i}", "s", "wf", tuple(prompt), out, out)


def q(doc, i, n=10):
    """A document plus an n-token question of its own."""
    return doc + tuple(range(900_000 + 100 * i, 900_000 + 100 * i + n))


def engine(slots=2, kv=10_000, **cfg):
    return SlotEngine("e", EngineParams(max_num_seqs=slots, token_budget=512), COST, kv, SlotConfig(**cfg),
                      report_evictions=True)


def run_one(eng, c, t):
    """Submit at t and run to completion; returns (finished event, all events, end time)."""
    events = eng.submit(c, t)
    while eng.wake is not None:
        t = eng.wake
        events += eng.advance(t)
    (fin,) = [e for e in events if isinstance(e, CallFinished)]
    return fin, events, t


def test_common_prefix():
    assert common_prefix((1, 2, 3), (1, 2, 4, 5)) == 2
    assert common_prefix((), (1,)) == 0
    assert common_prefix((1, 2), (1, 2)) == 2


def test_choose_slot_similarity_then_lru():
    slots = [Slot(0, q(A, 0), 114, last_used=1.0), Slot(1, q(B, 1), 114, last_used=2.0), Slot(2)]
    # 100 of 110 tokens shared with slot 1's prompt: sim 0.909 > 0.1; f_keep 100/114 ≥ 0.5: not saved
    assert choose_slot(slots, q(B, 5), 0.1) == (slots[1], False)
    # nothing similar: the least recently used idle slot, the empty one (t = -1)
    assert choose_slot(slots, q(C, 5), 0.1) == (slots[2], True)
    slots[2].last_used = 0.5
    assert choose_slot(slots, q(C, 5), 0.1) == (slots[2], True)
    slots[2].busy = True
    assert choose_slot(slots, q(C, 5), 0.1) == (slots[0], True)
    # similarity 0 disables the LCP rule: LRU even though slot 1 matches
    assert choose_slot(slots, q(B, 5), 0.0) == (slots[0], True)
    # a weak match (10 of 110 tokens: 0.09) does not beat the threshold
    assert choose_slot(slots, A[:10] + tuple(range(5, 105)), 0.1) == (slots[0], True)
    # equal last use: the last such slot, as llama-server's `<=` picks
    fresh = [Slot(0), Slot(1), Slot(2)]
    assert choose_slot(fresh, A, 0.1) == (fresh[2], True)
    assert choose_slot([Slot(0, busy=True)], A, 0.1) is None


def test_choose_slot_saves_content_it_mostly_loses():
    # the slot keeps 100 of its 400 cells (f_keep 0.25 < 0.5): worth saving to the RAM cache
    long_slot = Slot(0, A + tuple(range(5000, 5300)), 400)
    assert choose_slot([long_slot], q(A, 1), 0.1) == (long_slot, True)


def test_ram_cache_save_load_and_limit():
    ram = RamCache(limit=250)
    ram.save(q(A, 0), 114)
    ram.save(q(A, 0)[:50], 50)  # contained in a saved state: skipped
    assert [s.length for s in ram.states] == [114]
    ram.save(q(B, 1), 114)
    slot = Slot(0, q(C, 2), 114)
    ram.load(slot, q(B, 9))  # 100 of the saved B state (f_keep 0.88) beats 0 of the slot's
    assert slot.tokens == q(B, 1) and slot.length == 114 and len(ram.states) == 1
    ram.save(q(C, 2), 114)
    ram.save(A + tuple(range(7000, 7100)), 200)  # contains nothing saved; total 428 > 250
    dropped = ram.update()
    assert [d.tokens for d in dropped] == [q(A, 0), q(C, 2)] and ram.tokens == 200
    # a saved state that keeps < 25% of itself is never restored
    slot = Slot(1)
    ram.load(slot, A[:40] + (1,) * 60)  # 40 of 200 = 0.2
    assert slot.tokens == ()


def test_second_slot_recomputes_a_prefix_the_first_holds():
    """A request reuses the prefix only from the slot it lands in: while that slot is
    busy, a second request on the same document computes it again elsewhere."""
    eng = engine(cache_ram_tokens=0)
    fin, _, t = run_one(eng, call(1, q(A, 1)), 0.0)
    assert fin.cached_tokens == 0 and eng.slots[1].tokens == q(A, 1)  # fresh slots: the last one
    assert eng.slots[1].length == 110 + 4
    fin, _, t = run_one(eng, call(2, q(A, 2)), t + 1)
    assert fin.cached_tokens == 100  # slot 1 by similarity 100/110
    # two concurrent A requests: the second takes the other, empty slot and recomputes A
    ev = eng.submit(call(3, q(A, 3)), t + 1) + eng.submit(call(4, q(A, 4)), t + 1)
    while eng.wake is not None:
        ev += eng.advance(eng.wake)
    cached = {e.call_id: e.cached_tokens for e in ev if isinstance(e, CallFinished)}
    assert cached == {3: 100, 4: 0}


def test_lru_slot_overwritten_without_ram_cache_and_reported():
    eng = engine(cache_ram_tokens=0)
    t = 0.0
    for i, doc in enumerate((A, B)):  # slot 1 gets A, slot 0 gets B
        _, _, t = run_one(eng, call(i, q(doc, i)), t + 1)
    assert [s.tokens[:100] for s in eng.slots] == [B, A]
    # C: no similar slot; LRU is slot 1 (A, used first): A is gone
    fin, ev, t = run_one(eng, call(5, q(C, 5)), t + 1)
    assert fin.cached_tokens == 0 and eng.slots[1].tokens == q(C, 5)
    evicted = [e for e in ev if isinstance(e, PrefixEvicted)]
    assert [(e.tokens, e.start) for e in evicted] == [(q(A, 0), 0)]
    fin, _, _ = run_one(eng, call(6, q(A, 6)), t + 1)
    assert fin.cached_tokens == 0


def test_ram_cache_restores_an_overwritten_slot():
    eng = engine(cache_idle_slots=False)  # --cache-ram on, unbounded
    t = 0.0
    for i, doc in enumerate((A, B, C)):
        _, _, t = run_one(eng, call(i, q(doc, i)), t + 1)
    # A's slot was overwritten by C, but its state went to RAM first
    assert [s.tokens[:100] for s in eng.ram.states] == [A]
    fin, ev, _ = run_one(eng, call(7, q(A, 7)), t + 1)
    # LRU slot 0 (B) is saved; A's state is restored into it: 100 tokens cached
    assert fin.cached_tokens == 100
    assert [s.tokens[:100] for s in eng.ram.states] == [B]
    assert not [e for e in ev if isinstance(e, PrefixEvicted)]


def test_kv_unified_purges_idle_slots_lowest_id_first():
    # 300 cells shared by 3 slots; each request holds 110 + 4
    eng = engine(slots=3, kv=300, cache_ram_tokens=0)
    t = 0.0
    for i, doc in enumerate((A, B)):  # slot 2 then slot 1
        _, _, t = run_one(eng, call(i, q(doc, i)), t + 1)
    assert eng.held == 228
    fin, ev, _ = run_one(eng, call(3, q(C, 3)), t + 1)  # slot 0; needs 111 cells, 72 free
    assert fin.cached_tokens == 0
    # slot 0 is busy with C: the idle slot of lowest id holding cells (1, B) is purged
    assert [s.tokens[:100] for s in eng.slots] == [C, (), A]
    assert [e.tokens[:100] for e in ev if isinstance(e, PrefixEvicted)] == [B]


def test_split_kv_owns_cells_and_rejects_long_prompts():
    eng = engine(slots=2, kv=300, kv_unified=False, cache_ram_tokens=0)
    assert eng.slot_ctx == 150
    t = 0.0
    for i, doc in enumerate((A, B)):
        _, ev, t = run_one(eng, call(i, q(doc, i)), t + 1)
        assert not [e for e in ev if isinstance(e, PrefixEvicted)]
    (failed,) = eng.submit(call(9, A + B), t + 1)
    assert "slot context of 150" in failed.reason


def test_make_engine_picks_the_model_by_profile():
    fitted = FittedCostModel("m", (1e-3, 0, 1e-5, 0, 1e-4, 0), 4096, 4096, 2)
    assert type(make_engine("e", EngineParams(), fitted, 4096)) is SimEngine
    slotted = replace(fitted, slot_config=SlotConfig(cache_ram_tokens=0))
    assert type(make_engine("e", EngineParams(max_num_seqs=2), slotted, 4096)) is SlotEngine


def test_profile_yaml_round_trips_slot_cache(tmp_path):
    fitted = FittedCostModel("m", (1e-3, 0, 1e-5, 0, 1e-4, 0), 4096, 4096, 2,
                             slot_config=SlotConfig(False, 0, 0.25))
    fitted.save(tmp_path / "p.yaml")
    assert load_profile(tmp_path / "p.yaml").slot_config == SlotConfig(False, 0, 0.25)
    assert cache_ram_tokens(0, 2048, 8192) == 0
    assert cache_ram_tokens(None, 2048, 8192) is None
    assert cache_ram_tokens(1, 2048, 100) == 512  # 1 MiB of 2 KiB cells
    assert cache_ram_tokens(1, 2048, 8192) == 8192  # never below the context


def test_idle_slots_live_in_the_ram_cache_with_unified_kv():
    """--cache-idle-slots (default with --cache-ram): each start saves and, with the
    shared KV, clears the other idle slots; a later request is served from RAM."""
    eng = engine()
    t = 0.0
    for i, doc in enumerate((A, B, C)):
        _, _, t = run_one(eng, call(i, q(doc, i)), t + 1)
    # B's start moved A (slot 1) to RAM, C's start moved B (slot 0); C stays in slot 1
    assert [s.tokens[:100] for s in eng.ram.states] == [A, B]
    assert [s.tokens[:100] for s in eng.slots] == [(), C] and eng.held == 114
    fin, _, _ = run_one(eng, call(7, q(A, 7)), t + 1)
    assert fin.cached_tokens == 100  # the empty LRU slot 0 restored A from RAM
    assert [s.tokens[:100] for s in eng.ram.states] == [B, C]
    # split KV: idle slots are saved but keep their cells
    eng = engine(kv_unified=False)
    for i, doc in enumerate((A, B)):
        _, _, t = run_one(eng, call(i, q(doc, i)), t + 1)
    assert [s.tokens[:100] for s in eng.slots] == [B, A] and [s.tokens[:100] for s in eng.ram.states] == [A]
