"""Late binding: ready calls wait in the core's pool and are bound when an instance has room."""

from __future__ import annotations

import pytest
from helpers import TEST_WORKFLOWS, ScriptedDriver, live_spec, make_core, query

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.core.scheduler import SchedulerCore
from flowserve.graph.nodes import LLMNode, NodeResult
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.graph.prompt import Toks
from flowserve.graph.workflow import Graph, Workflow
from flowserve.policies import make_dispatch, queue_factory
from flowserve.profiles.instance import instance_profile
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.commands import QueryDone
from flowserve.types.work import WorkflowRef
from flowserve.workloads.base import QuerySpec, Workload


class Rows(Workflow):
    """One statement of LLM-in-SQL: an independent call per row."""

    name = "rows"

    def __init__(self, n: int) -> None:
        self.n = n

    def start(self, g: Graph) -> None:
        for i in range(self.n):
            g.add(LLMNode(f"r{i}", "row", (Toks((1, 2, 3, i + 10)),), 2))

    def output(self, results):
        return {"rows": len(results)}

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        pass


def test_binding_is_a_declared_property_of_dispatch_policies():
    assert make_dispatch("hexgen_wb").binding == "ready"  # WB binds at ready time by design
    assert make_dispatch("round_robin", {"binding": "late"}).binding == "late"
    with pytest.raises(Exception, match="binding"):
        make_dispatch("round_robin", {"binding": "sometimes"})


def test_a_statement_of_20000_calls_binds_only_what_instances_have_room_for():
    specs = [live_spec("a", max_inflight=4), live_spec("b", max_inflight=4)]
    core = SchedulerCore(specs, make_dispatch("least_load", {"binding": "late"}), queue_factory("fcfs"),
                         instance_profile, workflows={**TEST_WORKFLOWS, Rows.name: Rows})
    d = ScriptedDriver(core)
    n = 20_000
    d.arrive(query(WorkflowRef(Rows.name, (n,)), qid=1))
    bound_max = 0
    decisions_before = core.decisions
    while d.inflight:
        st = core.instance_status()
        bound = sum(s.queued + s.running for s in st)
        bound_max = max(bound_max, bound)
        d.finish(next(iter(d.inflight)))
    # Never more calls bound than the instances' room; the rest waited in the pool.
    assert bound_max <= 8
    assert len(d.sent) == n
    end = d.ended[1]
    assert isinstance(end, QueryDone) and end.output == {"rows": n}
    # Dispatch work is proportional to the calls released, not to the calls waiting.
    assert core.decisions - decisions_before <= n


def test_early_binding_queues_everything_at_once():
    specs = [live_spec("a", max_inflight=4), live_spec("b", max_inflight=4)]
    d = ScriptedDriver(make_core(specs, dispatch="least_load", workflows={Rows.name: Rows}))
    d.arrive(query(WorkflowRef(Rows.name, (1000,)), qid=1))
    st = d.core.instance_status()
    assert sum(s.queued + s.running for s in st) == 1000


def test_a_query_of_20000_calls_simulates_with_late_binding():
    # `flowserve bench core` runs the 100,000-call statement (a benchmark, not a test).
    n = 20_000
    step = tuple(CallStep("row", (Segment(1, 40), Segment(1000 + i, 8)), 2) for i in range(n))
    wl = Workload("rows", (QuerySpec(0, 0.0, QueryPlan("llm_sql", (step,))),))
    res = simulate(BUILTIN_CLUSTERS["hetero-1"], wl, PolicySpec("least_load", "fcfs", {"binding": "late"}),
                   record_calls=False)
    [q] = res.queries
    assert q.failed is None and q.latency > 0
