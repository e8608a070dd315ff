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
from flowserve.policies.flowserve_dispatch import FlowserveDispatch, pinned, slot_wait
from flowserve.policies.flowserve_queue import FlowserveQueue, batch_gap, engine_slots, entitled_slots
from flowserve.policies.queue_books import RunningBook, WaitingTally
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


def test_the_gate_holds_interactive_calls_beyond_the_sweet_spot() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5))
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


def test_batch_beside_interactive_stays_within_the_stricter_spot_one_prefill_at_a_time() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(batch_gain=0.9, batch_share=1.0))
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


def test_a_tenant_over_its_share_goes_after_the_others_and_with_reserve_waits() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(gain=0.5, batch_gain=0.9, tenant_weights="gold:3,free:1",
                                                         fair_slack=1e12, reserve=True))
    q = a.queue
    gold = call(tenant="gold")
    h.enqueue(gold, a)
    assert q.select(a, h.view) is gold
    h.release(gold, a)
    # at the running calls' 2k-token context (A100, 8B): spot 29 at gain 0.5, 4 at 0.9; free's share 29 / 4
    assert q.batch_limit(a) == 29 and q._beside(a) == 4
    free = [call(tenant="free") for _ in range(12)]
    for cs in free:
        h.enqueue(cs, a)
    for cs in free[:8]:  # up to 7 running it is within 7.25; the 8th still goes
        assert q.select(a, h.view) is cs
        h.release(cs, a)
    assert q.select(a, h.view) is None  # reserve: 8 ≥ 7.25 and 9 running ≥ 4, free waits below the spot of 29
    q.reserve = False
    assert q.select(a, h.view) is free[8]  # work-conserving (the default): nobody else waits, free goes on
    q.reserve = True
    later = call(tenant="gold")
    h.enqueue(later, a)
    assert q.waiting_before(call(tenant="gold")).calls == 1  # gold's wait skips free's four held calls
    assert q.waiting_before(call(tenant="free")).calls == 5
    assert q.select(a, h.view) is later
    h.release(later, a)
    del a.running[gold.id], a.running[later.id]
    h.at(10.0)
    assert q.select(a, h.view) is None  # gold was here 10 s ago: still active (tenant_memory_s 30)
    h.at(31.0)
    assert q.select(a, h.view) is free[8]  # gold is gone: free may use the whole spot


def test_pin_before_replicate_for_deadline_free_calls() -> None:
    h, (a, b) = harness_with(["a", "b"], FlowserveQueue)
    h.prefix_index.add(P, "a", 0.0)
    h.enqueue(call(tuple(range(10**6, 10**6 + 5000))), a)  # a owes an uncached 5000-token prefill first
    free_call = call(P + (9,))
    wait_a = COST.prefill_time(5000, 0)
    finish_a = wait_a + h.view.t_comp(free_call, a)  # queued prefill, then its own uncached tail
    finish_b = h.view.t_cold(free_call, b)  # idle b computes the whole prompt
    assert finish_b < finish_a < 2.0 * finish_b and finish_a > 1.5 * finish_b
    # without pinning the earliest finish wins
    assert FlowserveDispatch(w_free=1.0, efficiency=0.0, pin=False).choose(free_call, [a, b], h.view) is b
    # w_free = 1: pinned while a finishes within (1 + 1) × b's finish
    pinning = FlowserveDispatch(w_free=1.0, efficiency=0.0)
    assert pinning.choose(free_call, [a, b], h.view) is a and pinning.stats["pinned"] == 1
    # w_free = 0, but one of two instances has calls waiting (backlog 0.5): guard 1.5 < finish_a / finish_b
    tight = FlowserveDispatch(w_free=0.0, efficiency=0.0)
    assert tight.choose(call(P + (8,)), [a, b], h.view) is b and tight.stats["replicated"] == 1
    assert tight.choose(call(P + (6,), deadline=100.0), [a, b], h.view) is b  # deadlines: the score decides


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
