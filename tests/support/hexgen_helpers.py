"""Small hand-built cluster states for the Hexgen policy tests."""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.view import ClusterView
from flowserve.graph.nodes import CallEstimate, LLMNode, Node
from flowserve.graph.prompt import Toks
from flowserve.graph.runtime import QueryRun
from flowserve.graph.workflow import Graph, Workflow
from flowserve.policies.fcfs import FCFS
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query, WorkflowRef

MODEL = "llama-3.1-70b"


class Program(Workflow):
    """A workflow that starts with `first` nodes and expects `expected` more calls."""

    def __init__(self, first: Sequence[Node] = (), expected: Sequence[CallEstimate] = ()) -> None:
        self.first = list(first)
        self.expected = list(expected)

    def start(self, g: Graph) -> None:
        for n in self.first:
            g.add(n)

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return self.expected


def instance(name: str, gpu: str = "A100-80G", queue: object | None = None) -> InstanceState:
    spec = InstanceSpec(name, gpu, MODEL, 8)
    q = FCFS() if queue is None else queue  # a queue is falsy while empty
    return InstanceState(spec, cost_model_for(gpu, MODEL, 8), q)  # type: ignore[arg-type]


def harness_of(*instances: InstanceState, queries: Sequence[QueryState] = (), now: float = 0.0) -> PolicyHarness:
    return PolicyHarness(instances, queries=queries, now=now)


def view_of(*instances: InstanceState, queries: Sequence[QueryState] = (), now: float = 0.0) -> ClusterView:
    return harness_of(*instances, queries=queries, now=now).view


def query(qid: int, arrival: float = 0.0, deadline: float | None = None,
          program: Program | None = None) -> QueryState:
    prog = program or Program()
    return QueryState(Query(qid, arrival, "wf", WorkflowRef("hand-built"), deadline), QueryRun(prog, qid))


def call(cid: int, qs: QueryState, costs: dict[InstanceState, float], enqueued: float = 0.0,
         node: str | None = None, stage: str = "s") -> CallState:
    """A call of `qs` with the given predicted compute time on each instance."""
    key = node or f"n{cid}"
    cs = CallState(cid, LLMNode(key, stage, (Toks((1, 2, 3)),), 10), qs, enqueued, 3, 10, cid)
    cs.call = LLMCall(cid, qs.id, key, stage, "wf", (1, 2, 3), 10, 10)
    cs.enqueued = enqueued
    for inst, t in costs.items():
        cs.costs[(inst.profile, 0)] = t
    qs.inflight[cid] = cs
    return cs


def llm_node(key: str) -> LLMNode:
    return LLMNode(key, "s", (Toks((1, 2, 3)),), 10)
