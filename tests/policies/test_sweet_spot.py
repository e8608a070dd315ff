"""The sweet-spot gate of the flowserve queue, batch beside interactive work, the tenant-aware
wait and pin-before-replicate, by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from helpers import ScriptProgram, call_state, ref_of

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.tenants import TenantLedger
from flowserve.graph.runtime import QueryRun
from flowserve.policies.flowserve_gate import (
    Gate,
    batch_gap,
    batch_room,
    engine_slots,
    entitled_slots,
    gate_limit,
    hurt_by,
    spot_load,
)
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.queue_books import RunningBook, WaitingTally
from flowserve.policies.scoring.guards.pin import pinned
from flowserve.policies.scoring.scorers.finish import slot_wait
from flowserve.profiles.cost_model import cost_model_for
from flowserve.profiles.sweet_spot import (
    SweetSpots,
    batch_throughput,
    context_bucket,
    marginal_throughput,
    sweet_spot,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query

COST = cost_model_for("A100-80G", "llama-3.1-8b")
P = tuple(range(2000))
_ids = iter(range(1, 10**6))


def harness_with(names: list[str], queue) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b"), COST, queue()) for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def call(prompt: tuple[int, ...] = P, cls: str = "interactive", tenant: str = "default",
         deadline: float | None = None, out: int = 16) -> CallState:
    qid = next(_ids)
    q = Query(qid, 0.0, "w", ref_of(ScriptProgram([])), deadline, tenant, 0, cls)
    cs = call_state(LLMCall(next(_ids), qid, "n", "s", "w", prompt, out, out, tenant=tenant),
                    QueryState(q, QueryRun(ScriptProgram([]), qid)))
    cs.t_comp = COST.call_time(len(prompt), out)
    return cs


@dataclass(frozen=True)
class LinearStep:
    """A decode step of a + k·b seconds at batch b (the context does not matter)."""

    a: float
    k: float

    def decode_step_time(self, batch: int, total_context: float) -> float:
        return self.a + self.k * batch


def test_sweet_spot_by_hand() -> None:
    gpu = LinearStep(0.010, 0.001)  # 10 ms of weights, 1 ms per sequence
    assert batch_throughput(gpu, 1, 512) == pytest.approx(1 / 0.011)
    # the b-th sequence adds a / ((a + k·b)(a + k·(b − 1))) = 0.01 / (0.015 · 0.014) at b = 5
    assert marginal_throughput(gpu, 5, 512) == pytest.approx(5 / 0.015 - 4 / 0.014)
    # ≥ ½ · 1/0.011 while (10 + b)(9 + b) ≤ 220 ms²: b = 5 (210) passes, b = 6 (240) does not
    assert sweet_spot(gpu, 512, cap=256, gain=0.5) == 5
    assert sweet_spot(gpu, 512, cap=3, gain=0.5) == 3  # the engine's slots bound it
    assert sweet_spot(gpu, 512, cap=256, gain=0.0) == 256  # gain 0: no gate
    cpu = LinearStep(0.0, 0.004)  # no batching gain: the step doubles with the batch
    assert sweet_spot(cpu, 512, cap=4, gain=0.35) == 1
    # the roofline: a long context reaches the edge sooner (KV reads grow with the batch)
    assert sweet_spot(COST, 8192, 256) < sweet_spot(COST, 1024, 256) <= 256


def test_sweet_spots_memo_by_context_bucket() -> None:
    assert context_bucket(1000) == 1024 and context_bucket(1025) == 2048 and context_bucket(3) == 64
    spots = SweetSpots(0.5)
    gpu = LinearStep(0.010, 0.001)
    assert spots(gpu, 700, 256) == spots(gpu, 1024, 256) == 5
    with pytest.raises(ValueError, match="gain"):
        SweetSpots(1.5)


def test_small_formulas_by_hand() -> None:
    assert slot_wait(3, 6, 2.0) == 1.0  # 3 ahead, a slot frees every 2 / 6 s
    assert slot_wait(0, 6, 2.0) == 0.0 and slot_wait(-2, 6, 2.0) == 0.0
    assert batch_gap(0.2, 0.5) == 0.4  # prefills at most half the engine's time
    assert pinned(3.0, 1.6, 2.0)  # 3.0 ≤ 2 × 1.6
    assert not pinned(3.5, 1.6, 2.0)


def test_the_fixed_gate_holds_interactive_calls_beyond_the_sweet_spot() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5, adapt=False))
    q = a.queue
    while True:  # start calls while the queue releases them
        cs = call()
        h.enqueue(cs, a)
        if q.select(a, h.view) is not cs:
            break
        h.release(cs, a)
    waiting = cs
    # held at the sweet spot at the running calls' context (prompt + half the output, 2008 tokens)
    spot = sweet_spot(COST, 2048, 256, 0.5)
    assert len(a.running) == q.batch_limit(a) == spot and 1 < spot < engine_slots(a) == 256
    done = next(iter(a.running))
    del a.running[done]
    assert q.select(a, h.view) is waiting  # a slot freed
    assert FlowserveQueue(gain=0.0).batch_limit(a) == 256


def test_batch_room_by_hand() -> None:
    assert batch_room(29, 256, 0, 0.0, False) == 256  # batch work alone: every slot
    assert batch_room(29, 256, 1, 0.0, False) == 29  # an interactive call runs: the gate's limit
    assert batch_room(29, 256, 0, 0.1, False) == 29  # interactive calls arrive here
    assert batch_room(2, 4, 0, 0.0, True) == 2  # llama-server: its slots hold its prefix cache
    assert batch_room(300, 256, 0, 0.0, False) == 300  # never below the limit


def test_gate_limit_by_hand() -> None:
    # spot 29, 256 slots: the spot while nobody waits
    assert gate_limit(29, 256, 0, 0, False, False) == 29
    assert gate_limit(29, 256, 3, 0, False, False) == 256  # calls wait and nothing is fragile: open
    assert gate_limit(29, 256, 3, 1, False, False) == 29  # a fragile call runs, holding hurts nobody: closed
    assert gate_limit(29, 256, 3, 1, True, False) == 256  # the first waiting call is at risk too: open
    assert gate_limit(29, 256, 3, 1, False, True) == 256  # sustained overload: holding loses without bound
    assert hurt_by(-1.0, 2.0, 1.4) is False  # U + t_comp·(f − 1) = −1 + 0.8 ≤ 0: room for the slowdown
    assert hurt_by(-1.0, 2.0, 1.6) is True  # −1 + 1.2 > 0
    assert hurt_by(0.5, 2.0, 1.6) is False  # already past its budget: it misses either way
    # λ 2/s, P 0.1 s, 100 steps of 0.02 s at batch 10: c = 0.1 + 0.2 = 0.3 s, ρ = 0.6
    assert spot_load(2.0, 0.1, 100, 0.02, 10) == pytest.approx(0.6)


def test_the_adaptive_gate_opens_for_waiting_calls_and_closes_for_a_fragile_one() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5))
    q = a.queue
    spot = sweet_spot(COST, 2048, 256, 0.5)
    for _ in range(spot):  # deadline-free calls fill the spot
        cs = call()
        h.enqueue(cs, a)
        assert q.select(a, h.view) is cs
        h.release(cs, a)
    # the next calls wait: nothing is fragile, so the gate opens past the spot. A call with a
    # deadline that fits at the spot's speed but not at the open batch's is released first
    # and is fragile: its urgency U = t_comp − budget (at t = 0) lies in (−t_comp·(f − 1), 0],
    # f the step at the open batch (the 31 calls here) over the step at the spot. Its budget
    # is k × its deadline (Eq. 5); U = t_comp·(1 − f)/2 for a deadline of t_comp·(1 + f)/(2k)
    relaxed = call()
    h.enqueue(relaxed, a)
    t_comp = relaxed.t_comp  # the same prompt, as cached here
    f = Gate.slowdown(a, 2008.0, spot, spot + 2)
    k = q.budget(call(deadline=1.0), h.view)
    tight = call(deadline=t_comp * (1 + f) / (2 * k))
    h.enqueue(tight, a)
    assert q.urgency_of(tight, h.view) == pytest.approx(t_comp * (1 - f) / 2)
    assert q.batch_limit(a) == 256
    assert q.select(a, h.view) is tight
    h.release(tight, a)
    assert q.batch_limit(a) == spot and q.select(a, h.view) is None  # closed while it runs
    del a.running[tight.id]
    assert q.select(a, h.view) is relaxed  # it ended: the gate opens again


def test_batch_floor_starts_batch_work_while_interactive_calls_wait() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5, tenant_weights="gold:3,etl:1"))
    q = a.queue
    gold = [call(tenant="gold") for _ in range(40)]
    job = [call(cls="batch", tenant="etl") for _ in range(12)]
    for cs in [*gold, *job]:
        h.enqueue(cs, a)
    got = []
    for _ in range(40):
        cs = q.select(a, h.view)
        h.release(cs, a)
        got.append(cs)
    # etl's weighted share of the spot of 29 beside gold: 29 × 1 / (1 + 3) = 7.25 slots
    assert sum(1 for cs in got if cs in job) == 8  # 0..7 running is below 7.25, the 9th is not
    assert got[0] is job[0]  # none ran: the first release is batch work's
    # the floor comes out of the waiting calls' slack: with the first of them at risk (a
    # deadline it already misses), batch work keeps one call running, no more
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5, tenant_weights="gold:3,etl:1"))
    q = a.queue
    job = [call(cls="batch", tenant="etl") for _ in range(12)]
    for cs in [*(call(tenant="gold", deadline=1e-3) for _ in range(40)), *job]:
        h.enqueue(cs, a)
    got = []
    for _ in range(29):
        cs = q.select(a, h.view)
        h.release(cs, a)
        got.append(cs)
    assert sum(1 for cs in got if cs in job) == 1 and got[0] is job[0]


def test_batch_beside_interactive_stays_within_the_stricter_spot_one_prefill_at_a_time() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(batch_gain=0.9, batch_share=1.0, batch_floor=False))
    q = a.queue
    inter = call()
    h.enqueue(inter, a)
    job = [call(cls="batch") for _ in range(3)]
    for cs in job:
        h.enqueue(cs, a)
    assert q.select(a, h.view) is inter  # interactive first; no batch while it waits
    h.release(inter, a)
    assert q.select(a, h.view) is job[0]
    h.release(job[0], a)
    gap = batch_gap(COST.prefill_time(len(P), 0), 1.0)  # its whole prompt was uncached
    assert q.select(a, h.view) is None  # beside interactive work: after the first's prefill
    h.at(gap + 1e-6)
    assert q.select(a, h.view) is job[1]
    del a.running[inter.id]  # no interactive call runs: batch fills the engine
    h.release(job[1], a)
    assert q.select(a, h.view) is job[2]


def test_an_interactive_call_waits_only_for_the_tenants_not_ahead_of_it() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(tenant_weights="gold:3,free:1", fair_slack=100.0))
    q = a.queue
    free = [call(tenant="free") for _ in range(3)]
    gold = call(tenant="gold")
    for cs in [*free, gold]:
        h.enqueue(cs, a)
    h.serve("free", prompt_tokens=500)  # free 500, gold 0: more than 100 ahead
    ahead_gold = q.waiting_before(call(tenant="gold"))
    assert ahead_gold.calls == 1 and ahead_gold.work_s == pytest.approx(gold.t_comp)
    assert q.waiting_before(call(tenant="free")).calls == 4  # gold is behind free: it goes first
    assert q.waiting_before(call(cls="batch")).calls == 4


def test_entitled_slots_by_hand() -> None:
    assert entitled_slots(3.0, 4.0, 29) == pytest.approx(21.75)  # gold:3 of gold:3 + free:1
    assert entitled_slots(1.0, 4.0, 29) == pytest.approx(7.25)
    assert entitled_slots(1.0, 0.0, 29) == 29.0


def test_a_tenant_over_its_share_goes_after_the_others_and_beside_shielded_calls_is_held() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5, batch_gain=0.9, tenant_weights="gold:3,free:1",
                                                         fair_slack=1e12, flood_share=0.5))
    q = a.queue
    gold = call(tenant="gold")
    h.enqueue(gold, a)
    assert q.select(a, h.view) is gold
    h.release(gold, a)  # nobody is over a share yet: not shielded
    # at the running calls' 2k-token context (A100, 8B): spot 29 at gain 0.5, 4 at 0.9; free's share 29 / 4
    assert q._gate.spot(a, 2008.0) == 29 and q._gate.beside(a, 2008.0) == 4
    free = [call(tenant="free") for _ in range(12)]
    for cs in free:
        h.enqueue(cs, a)
    for cs in free[:9]:  # up to 7 running it is within 7.25; past it, nobody else waits: work-conserving
        assert q.select(a, h.view) is cs
        h.release(cs, a)
    later = call(tenant="gold")
    h.enqueue(later, a)
    assert q.waiting_before(call(tenant="gold")).calls == 1  # gold's wait skips free's held calls
    assert q.waiting_before(call(tenant="free")).calls == 4
    assert q.select(a, h.view) is later  # gold is within its share: it goes first
    h.release(later, a)  # free is over its share now: gold's deadline-free call is shielded
    assert q.select(a, h.view) is None  # beside it free is held like batch work: 11 running ≥ 4
    del a.running[later.id]
    assert q.select(a, h.view) is free[9]  # the shielded call ended: work-conserving again


def test_running_book_and_waiting_tally() -> None:
    _, (a,) = harness_with(["a"], FlowserveQueue)
    book = RunningBook()
    x, y = call(), call(cls="batch")
    for cs in (x, y):
        book.start(cs, 0.0, 0.5)
        a.running[cs.id] = cs
    assert book.interactive == 1 and book.context() == pytest.approx((len(P) + 8) * 1.0)
    assert book.prefill_owed_s(0.2) == pytest.approx(2 * 0.3)
    del a.running[x.id]
    book.sync(a)
    assert book.interactive == 0 and len(book) == 1
    tally = WaitingTally()
    tally.add("gold", 1.0, 0.25)
    tally.add("gold", 2.0, 0.5)
    tally.add(None, 4.0, 1.0)
    assert tally.total().work_s == 7.0 and tally.total(lambda g: g is not None).calls == 2
    tally.remove("gold", 1.0, 0.25)
    tally.remove("gold", 2.0, 0.5)
    assert "gold" not in tally.groups and tally.total().prefill_s == 1.0
    assert TenantLedger().counter("x") == 0.0
