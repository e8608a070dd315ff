"""The sans-IO core: graphs, dispatch, release, failures — driven by a scripted driver."""

import random

from helpers import ScriptedDriver, ScriptProgram, live_spec, llm, make_core, query
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.core import CallStatus, InstanceStatus, SchedulerCore
from flowserve.errors import FailureKind
from flowserve.graph.nodes import LLMNode, OpNode
from flowserve.graph.prompt import Toks
from flowserve.types.commands import CancelCall, QueryDone, QueryFailed, SendCall
from flowserve.types.events import CallFailed, CallFinished, InstanceCapacity, InstanceDown, InstanceUp
from flowserve.types.specs import InstanceSpec


def status(core: SchedulerCore, name: str) -> InstanceStatus:
    return next(s for s in core.instance_status() if s.name == name)


def test_dependencies_respected_and_graph_expands_at_run_time():
    # A → (B, C) → D; finishing D adds two self-correction rounds E1 → E2, then F
    prog = ScriptProgram(
        [llm("A"), llm("B", deps=("A",)), llm("C", deps=("A",)), llm("D", deps=("B", "C"))],
        {"D": [llm("E1", deps=("D",))], "E1": [llm("E2", deps=("E1",))],
         "E2": [OpNode("X", "exec", "sql", deps=("E2",)), llm("F", deps=("X",))]},
    )
    deps_of = {n.key: n.deps for n in [*prog.first, *(m for ns in prog.expand.values() for m in ns)]}
    core = make_core([live_spec("a", 8), live_spec("b", 8)])
    d = ScriptedDriver(core)
    q = query(prog)
    d.arrive(q)
    assert [s.call.node for s in d.sent] == ["A"]
    done_nodes = set()
    while d.inflight or d.ops:
        for sc in list(d.sent):
            if sc.call.id in d.inflight:
                deps = deps_of[sc.call.node]
                assert set(deps) <= done_nodes, (sc.call.node, deps)
        if d.inflight:
            cid = next(iter(d.inflight))
            done_nodes.add(d.inflight[cid].call.node)
            d.finish(cid)
        else:
            oid = next(iter(d.ops))
            done_nodes.add(d.ops[oid].op.node)
            d.finish_op(oid)
    assert [s.call.node for s in d.sent][:1] == ["A"]
    assert {s.call.node for s in d.sent[1:3]} == {"B", "C"}
    assert [s.call.node for s in d.sent[3:]] == ["D", "E1", "E2", "F"]
    end = d.ended[q.id]
    assert isinstance(end, QueryDone) and end.latency == end.time - q.arrival
    assert core.open_queries == 0 and core.open_calls == 0


def test_cycle_and_unknown_dependency_fail_the_query_with_the_reason():
    core = make_core([live_spec("a")])
    d = ScriptedDriver(core)
    cyc = query(ScriptProgram([llm("A", deps=("B",)), llm("B", deps=("A",))]))
    d.arrive(cyc)
    assert isinstance(d.ended[cyc.id], QueryFailed)
    assert "cycle" in d.ended[cyc.id].reason and "'A'" in d.ended[cyc.id].reason
    unk = query(ScriptProgram([llm("A")], {"A": [llm("B", deps=("Z",))]}))
    d.arrive(unk)
    d.run_all()
    assert "unknown node 'Z'" in d.ended[unk.id].reason
    dup = query(ScriptProgram([llm("A")], {"A": [llm("A")]}))
    d.arrive(dup)
    d.run_all()
    assert "duplicate" in d.ended[dup.id].reason
    assert {d.ended[q.id].kind for q in (cyc, unk, dup)} == {FailureKind.APP_ERROR}
    assert not core.open_queries


def test_prompt_longer_than_context_fails_clearly():
    core = make_core([live_spec("a", model="llama-2-7b")])
    d = ScriptedDriver(core)
    q = query(ScriptProgram([llm("A", n=5000)]))
    d.arrive(q)
    assert not d.sent
    assert "prompt of 5000 tokens" in d.ended[q.id].reason and "4096" in d.ended[q.id].reason
    assert d.ended[q.id].kind is FailureKind.CONTEXT_OVERFLOW


def test_release_respects_max_inflight_in_fcfs_order():
    core = make_core([live_spec("a", max_inflight=2)])
    d = ScriptedDriver(core)
    qs = [query(ScriptProgram([llm("A")]), t=i) for i in range(5)]
    for q in qs:
        d.arrive(q)
    assert [s.call.query_id for s in d.sent] == [qs[0].id, qs[1].id]
    assert status(core, "a").queued == 3
    d.finish(d.sent[1].call.id)
    assert [s.call.query_id for s in d.sent] == [q.id for q in qs[:3]]
    d.run_all()
    assert [s.call.query_id for s in d.sent] == [q.id for q in qs]
    assert all(isinstance(d.ended[q.id], QueryDone) for q in qs)
    assert status(core, "a").outstanding_s < 1e-9


def test_engine_capacity_gates_release():
    spec = InstanceSpec("s", "A100-80G", "llama-3.1-8b", 1, backend="sim", reports_capacity=True)
    core = make_core([spec])
    d = ScriptedDriver(core)
    d.feed(InstanceCapacity(0.0, "s", free_seqs=0, headroom_tokens=100, kv_free_tokens=10**6))
    q = query(ScriptProgram([llm("A"), llm("B")]))
    d.arrive(q)
    assert not d.sent  # no free slot
    d.feed(InstanceCapacity(0.0, "s", free_seqs=5, headroom_tokens=50, kv_free_tokens=10**6))
    assert len(d.sent) == 1  # headroom used up by the first 100-token prompt
    d.feed(InstanceCapacity(0.1, "s", free_seqs=4, headroom_tokens=500, kv_free_tokens=10**6))
    assert len(d.sent) == 2


def test_least_load_picks_the_instance_with_least_outstanding_work():
    core = make_core([live_spec("a", 100), live_spec("b", 100)], dispatch="least_load")
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([llm("A", n=8000, out=500)])))
    assert d.sent[-1].instance == "a"
    d.arrive(query(ScriptProgram([llm("A", n=100, out=5)])))
    assert d.sent[-1].instance == "b"
    d.arrive(query(ScriptProgram([llm("A", n=100, out=5)])))
    assert d.sent[-1].instance == "b"  # a still holds the long call


def test_failed_call_is_redispatched_then_query_fails_with_reason():
    core = make_core([live_spec("a"), live_spec("b")], max_retries=2)
    d = ScriptedDriver(core)
    q = query(ScriptProgram([llm("A"), llm("B")]))
    d.arrive(q)
    first = d.sent[0]
    d.inflight.pop(first.call.id)
    d.feed(CallFailed(1.0, first.call.id, first.instance, "connection refused"))
    assert d.sent[-1].call.id == first.call.id and d.sent[-1].instance != first.instance
    for _ in range(2):
        last = d.sent[-1]
        d.inflight.pop(last.call.id)
        d.feed(CallFailed(2.0, last.call.id, last.instance, "HTTP 503"))
    end = d.ended[q.id]
    assert isinstance(end, QueryFailed) and "HTTP 503" in end.reason and "3 attempt" in end.reason
    assert end.kind is FailureKind.ENGINE_ERROR
    # the sibling call was cancelled, nothing is left anywhere
    assert any(isinstance(c, CancelCall) for c in d.commands)
    assert core.open_calls == 0 and all(not i.running and not i.queued for i in core.instance_status())


def test_non_retryable_failure_fails_at_once():
    core = make_core([live_spec("a"), live_spec("b")])
    d = ScriptedDriver(core)
    q = query(ScriptProgram([llm("A")]))
    d.arrive(q)
    sc = d.sent[0]
    d.feed(CallFailed(1.0, sc.call.id, sc.instance, "HTTP 400 bad request", False, FailureKind.ENGINE_REJECTED))
    assert "HTTP 400" in d.ended[q.id].reason and d.ended[q.id].kind is FailureKind.ENGINE_REJECTED


def test_instance_down_moves_its_calls_and_ignores_late_results():
    core = make_core([live_spec("a", 1), live_spec("b", 1)])
    d = ScriptedDriver(core)
    qs = [query(ScriptProgram([llm("A")])) for _ in range(4)]
    for q in qs:
        d.arrive(q)
    on_a = [s for s in d.sent if s.instance == "a"]
    cmds = d.feed(InstanceDown(1.0, "a", "circuit open"))
    assert any(isinstance(c, CancelCall) and c.instance == "a" for c in cmds)
    assert status(core, "a").queued == 0 and not status(core, "a").running
    # a late result from the lost instance is ignored
    stale = on_a[0].call.id
    assert core.handle(CallFinished(1.5, stale, "a", 5)) == []
    assert core.call_status(stale) is CallStatus.QUEUED  # still live: moved to b, waiting for its one slot
    d.run_all()
    assert all(isinstance(d.ended[q.id], QueryDone) for q in qs)
    assert all(s.instance == "b" for s in d.sent[len(d.sent) - 3:])
    d.feed(InstanceUp(9.0, live_spec("a", 1)))
    q = query(ScriptProgram([llm("A")]))
    d.arrive(q)
    d.arrive(query(ScriptProgram([llm("A")])))
    assert {s.instance for s in d.sent[-2:]} == {"a", "b"}


def test_no_instance_for_model_fails_the_query():
    core = make_core([live_spec("a", model="mistral-7b")])
    d = ScriptedDriver(core)
    q = query(ScriptProgram([LLMNode("A", "s", (Toks((1, 2, 3)),), 5, model="llama-3.1-8b")]))
    d.arrive(q)
    assert "no instance is up that serves llama-3.1-8b" in d.ended[q.id].reason
    assert d.ended[q.id].kind is FailureKind.NO_INSTANCE


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_no_query_is_ever_lost(seed):
    """Random DAG workflows under random finishes, failures and instance churn: every
    arrived query ends exactly once (ScriptedDriver asserts no double end)."""
    rng = random.Random(seed)
    core = make_core([live_spec("a", 2), live_spec("b", 3), live_spec("c", 1)],
                     dispatch=rng.choice(["round_robin", "least_load"]), max_retries=2)
    d = ScriptedDriver(core)
    arrived = []
    for _ in range(rng.randint(1, 8)):
        nodes = []
        for j in range(rng.randint(1, 5)):
            deps = tuple(f"N{k}" for k in range(j) if rng.random() < 0.4)
            nodes.append(llm(f"N{j}", deps=deps))
        expand = {f"N{rng.randrange(len(nodes))}": [llm("R1", deps=("N0",))]} if rng.random() < 0.5 else {}
        if rng.random() < 0.1:  # a broken expansion
            expand = {"N0": [llm("Q", deps=("Q",))]}
        q = query(ScriptProgram(nodes, expand))
        arrived.append(q.id)
        d.arrive(q)
    down: set[str] = set()
    for _ in range(400):
        if not (d.inflight or d.ops) and not core.open_queries:
            break
        r = rng.random()
        if r < 0.08 and len(down) < 2:
            name = rng.choice([n for n in "abc" if n not in down])
            down.add(name)
            d.feed(InstanceDown(d.t, name))
        elif r < 0.14 and down:
            name = down.pop()
            d.feed(InstanceUp(d.t, live_spec(name, 2)))
        elif d.inflight:
            cid = rng.choice(list(d.inflight))
            if rng.random() < 0.15:
                sc = d.inflight.pop(cid)
                d.feed(CallFailed(d.t, cid, sc.instance, "boom", retryable=rng.random() < 0.7))
            else:
                d.finish(cid)
        elif d.ops:
            d.finish_op(next(iter(d.ops)))
        elif core.open_queries:  # everything is queued on down instances: bring one back
            name = down.pop()
            d.feed(InstanceUp(d.t, live_spec(name, 2)))
    assert set(d.ended) == set(arrived)
    assert not core.open_queries and not core.open_calls
    for inst in core.instance_status():
        assert not inst.running and not inst.queued
        assert inst.outstanding_s < 1e-6


def test_send_call_carries_predicted_output_not_truth():
    core = make_core([live_spec("a")])
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([llm("A", out=999)])))
    call = d.sent[0].call
    # the truth lives in the driver's oracle, never in what policies see
    assert call.predicted_output == 128 and not hasattr(call, "sim_output")  # the predictor's default
    assert isinstance(d.sent[0], SendCall)
