"""Non-LLM engine instances in the core: batches across queries, topology order, errors."""

from __future__ import annotations

from helpers import make_core

from flowserve.graph.workflow import Graph, Workflow
from flowserve.profiles.ops import OpProfile
from flowserve.types.commands import QueryFailed, RunBatch, RunOp
from flowserve.types.events import OpFinished, QueryArrived
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, WorkflowRef

LLM = InstanceSpec("llm", "A100-80G", "llama-3.1-8b", 1, max_inflight=4, backend="openai")


def emb_spec(max_units: int = 512) -> InstanceSpec:
    prof = OpProfile(0.01, 0.001, max_units=max_units)
    return InstanceSpec("emb", "", "embedding", kind="embedding", op_profile=prof)


class Embed(Workflow):
    def __init__(self, units: int = 1, chained: int = 0) -> None:
        self.units, self.chained = units, chained

    def start(self, g: Graph) -> None:
        prev = g.tool("e0", "embed", batchable=True, units=self.units)
        for i in range(1, self.chained + 1):
            prev = g.tool(f"e{i}", "embed", batchable=True, units=self.units, x=prev)


def arrive(core, qid: int, wf: type[Workflow], *args, t: float = 0.0):
    """A query of workflow class `wf` built with `args` (the core builds it from the ref)."""
    return core.handle(QueryArrived(t, Query(qid, t, "w", WorkflowRef(wf.__name__, args))))


def core_of(specs, queue: str = "fcfs"):
    return make_core(specs, queue=queue, workflows={c.__name__: c for c in (Embed, Branches, Tool, Bad)})


def batches(cmds) -> list[RunBatch]:
    return [c for c in cmds if isinstance(c, RunBatch)]


def test_one_batch_holds_many_queries_ops():
    core = core_of([LLM, emb_spec()])
    first = batches(arrive(core, 1, Embed))
    assert [[op.query_id for op in b.ops] for b in first] == [[1]]
    assert batches(arrive(core, 2, Embed, t=0.1)) == []  # the instance runs a batch: queued
    assert batches(arrive(core, 3, Embed, t=0.2)) == []
    nxt = batches(core.handle(OpFinished(0.3, first[0].ops[0].id)))
    assert len(nxt) == 1 and sorted(op.query_id for op in nxt[0].ops) == [2, 3]
    assert nxt[0].instance == "emb"


def test_batches_respect_max_units():
    core = core_of([LLM, emb_spec(max_units=10)])
    first = batches(arrive(core, 1, Embed, 4))
    for q in (2, 3, 4):
        arrive(core, q, Embed, 4, t=0.1)
    nxt = batches(core.handle(OpFinished(0.3, first[0].ops[0].id)))
    assert [op.query_id for op in nxt[0].ops] == [2, 3]  # 8 units; a third would exceed 10


def test_topology_orders_buckets_by_arrival_then_depth():
    core = core_of([LLM, emb_spec(max_units=1)], queue="topology")
    first = batches(arrive(core, 1, Embed))
    arrive(core, 3, Embed, t=0.2)  # a later query: its bucket comes second
    arrive(core, 2, Embed, 1, 2, t=0.1)  # chained: e0 has depth 3
    order = []
    cmds = core.handle(OpFinished(0.3, first[0].ops[0].id))
    while (b := batches(cmds)):
        order.append((b[0].ops[0].query_id, b[0].ops[0].node))
        cmds = core.handle(OpFinished(1.0, b[0].ops[0].id))
    # the earliest bucket first (its next steps too), then the later query's
    assert order == [(2, "e0"), (2, "e1"), (2, "e2"), (3, "e0")]


class Branches(Workflow):
    def __init__(self, short_first: bool) -> None:
        self.short_first = short_first

    def start(self, g: Graph) -> None:
        if self.short_first:
            g.tool("short", "embed", batchable=True)
        g.tool("long1", "embed", batchable=True, x=g.tool("long0", "embed", batchable=True))
        if not self.short_first:
            g.tool("short", "embed", batchable=True)


def test_inside_a_bucket_the_deepest_node_goes_first():
    def first_two(queue: str, short_first: bool) -> list[str]:
        core = core_of([LLM, emb_spec(max_units=1)], queue=queue)
        busy = batches(arrive(core, 1, Embed))
        arrive(core, 2, Branches, short_first, t=0.1)
        b = batches(core.handle(OpFinished(0.3, busy[0].ops[0].id)))
        return [b[0].ops[0].node, batches(core.handle(OpFinished(0.4, b[0].ops[0].id)))[0].ops[0].node]

    for short_first in (True, False):  # the critical path first, whatever the issue order
        assert first_two("topology", short_first)[0] == "long0"
    assert {first_two("fcfs", s)[0] for s in (True, False)} == {"long0", "short"}  # fcfs: issue order


def test_no_instance_of_the_kind_fails_the_query_with_its_reason():
    core = core_of([LLM])
    out = arrive(core, 1, Embed)
    fail = [c for c in out if isinstance(c, QueryFailed)]
    assert fail and "no embedding instance is up to run op 'embed'" in fail[0].reason


class Tool(Workflow):
    def start(self, g: Graph) -> None:
        g.tool("s", "web_search", q="x")


class Bad(Workflow):
    def start(self, g: Graph) -> None:
        g.tool("s", "embed", batchable=True, after=["nowhere"])


def test_non_batchable_ops_stay_driver_tools():
    out = arrive(core_of([LLM, emb_spec()]), 1, Tool)
    assert [c.op.op for c in out if isinstance(c, RunOp)] == ["web_search"]


def test_a_step_reading_data_nothing_produces_fails_clearly():
    out = arrive(core_of([LLM, emb_spec()]), 1, Bad)
    assert "depends on unknown node 'nowhere'" in next(c for c in out if isinstance(c, QueryFailed)).reason
