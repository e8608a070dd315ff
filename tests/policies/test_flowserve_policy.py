"""The flowserve dispatch and queue policy, query classes and tenant fairness."""

from __future__ import annotations

import pytest
from helpers import ScriptProgram, call_state, ref_of

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.graph.runtime import QueryRun
from flowserve.policies import DISPATCH_NAMES, QUEUE_POLICIES, make_dispatch, queue_factory
from flowserve.policies.fcfs import FCFS
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query

COST = cost_model_for("A100-80G", "llama-3.1-8b")
P = tuple(range(2000))
_ids = iter(range(1, 10**6))


def harness_with(names: list[str], queue=FCFS) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b"), COST, queue()) for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def view_with(names: list[str], queue=FCFS) -> tuple[ClusterView, list[InstanceState]]:
    harness, insts = harness_with(names, queue)
    return harness.view, insts


def call(prompt: tuple[int, ...] = P, cls: str = "interactive", tenant: str = "default",
         deadline: float | None = None, out: int = 16) -> CallState:
    qid = next(_ids)
    q = Query(qid, 0.0, "w", ref_of(ScriptProgram([])), deadline, tenant, 0, cls)
    qs = QueryState(q, QueryRun(ScriptProgram([]), qid))
    cs = call_state(LLMCall(next(_ids), qid, "n", "s", "w", prompt, out, out, tenant=tenant), qs)
    cs.t_comp = COST.call_time(len(prompt), out)
    return cs


def test_registered_and_validated() -> None:
    assert "flowserve" in DISPATCH_NAMES and make_dispatch("flowserve").profile.name == "flowserve"
    assert QUEUE_POLICIES["flowserve"] is FlowserveQueue
    assert make_dispatch("flowserve").uses_deadline
    weighted = queue_factory("flowserve", {"tenant_weights": "gold:3,free:1"})()
    assert weighted.tenant_weights == {"gold": 3.0, "free": 1.0}
    mapped = queue_factory("flowserve", {"tenant_weights": {"gold": 3, "free": 1}})()
    assert mapped.tenant_weights == {"gold": 3.0, "free": 1.0}
    with pytest.raises(ConfigError, match="'batch_share' expects float, got"):
        queue_factory("flowserve", {"batch_share": {"a": 1}})  # a mapping where a number belongs: said so
    with pytest.raises(ConfigError, match="batch_share"):
        queue_factory("flowserve", {"batch_share": "0"})
    with pytest.raises(ConfigError, match="gain"):
        queue_factory("flowserve", {"gain": "2"})
    with pytest.raises(ConfigError, match="tenant weight"):
        queue_factory("flowserve", {"tenant_weights": "gold:-3"})
    with pytest.raises(ConfigError, match="w_free must be in"):
        make_dispatch("flowserve", {"uncached_work.w_free": "2"})
    with pytest.raises(ConfigError, match="has no parameter 'w_free'"):
        make_dispatch("flowserve", {"w_free": "0.2"})


def test_slack_trades_the_earliest_finish_for_a_cheaper_call() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    h.prefix_index.add(P, "a", 0.0)
    cs = call(P + (9,))
    tc_a, tc_b = view.t_comp(cs, a), view.t_comp(cs, b)
    assert tc_a < tc_b
    # a (cached) finishes later than idle b by a margin smaller than the saving
    a.outstanding = tc_b - tc_a + 0.5 * (tc_b - tc_a)
    def flowserve(w_free: float) -> object:
        return make_dispatch("flowserve", {"finish.wait_model": "serial", "uncached_work.weight": 1,
                                           "uncached_work.w_free": w_free, "pin.w_free": w_free,
                                           "pin.wait_model": "serial"})

    tight, loose = flowserve(0.0), flowserve(1.0)
    assert tight.choose(cs, [a, b], view) is b  # no slack: the earliest finish
    assert loose.choose(cs, [a, b], view) is a  # slack: the cheaper call
    assert tight.choose(call(P + (9,), cls="batch"), [a, b], view) is a  # batch: always w = 1


def test_interactive_work_ignores_batch_queued_ahead_but_batch_does_not() -> None:
    view, (a, b) = view_with(["a", "b"], FlowserveQueue)
    for _ in range(3):
        cs = call(cls="batch")
        cs.instance = "a"
        a.queue.push(cs)
        a.outstanding += cs.t_comp
    b.outstanding = 0.5 * a.outstanding
    inter, batch = call(), call(cls="batch")
    assert a.queue.waiting_before(inter).calls == 0  # batch work goes after it
    assert a.queue.waiting_before(batch).work_s == pytest.approx(a.outstanding)
    serial = make_dispatch("flowserve", {"finish.wait_model": "serial", "pin.wait_model": "serial"})
    assert serial.choose(inter, [a, b], view) is a  # a's queue is all batch
    assert serial.choose(batch, [a, b], view) is b


def test_queue_serves_interactive_first_then_batch_fills_the_engine() -> None:
    view, (a,) = view_with(["a"], lambda: FlowserveQueue(batch_floor=False))
    q = a.queue
    batch = [call(cls="batch") for _ in range(3)]
    for cs in batch:
        q.push(cs)
    inter = call(deadline=50.0)
    q.push(inter)
    assert len(q) == 4 and next(iter(q)) is inter
    assert q.select(a, view) is inter
    q.remove(inter, released=True)
    assert q.select(a, view) is batch[0]  # FCFS among batch
    q.remove(batch[1], released=False)
    assert q.waiting_before(call(cls="batch")).work_s == pytest.approx(batch[0].t_comp + batch[2].t_comp)


def test_weighted_fair_share_lets_the_least_served_tenant_go_first() -> None:
    h, (a,) = harness_with(["a"], lambda: FlowserveQueue(tenant_weights="gold:3,free:1", fair_slack=100.0))
    view, q = h.view, a.queue
    urgent_free = call(tenant="free", deadline=1.0)
    relaxed_gold = call(tenant="gold", deadline=500.0)
    h.enqueue(urgent_free, a)
    h.enqueue(relaxed_gold, a)
    assert q.select(a, view) is urgent_free  # counters equal: urgency decides
    h.serve("free", prompt_tokens=150)  # free: 150 weighted tokens
    h.serve("gold", prompt_tokens=300)  # gold: 300 / 3 = 100
    assert view.tenants.counter("gold") == 100.0
    assert q.select(a, view) is urgent_free  # 150 − 100 ≤ 100
    h.serve("free", output_tokens=30)  # free: 150 + 2·30 = 210 > 100 + 100
    assert q.select(a, view) is relaxed_gold
