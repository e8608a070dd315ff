"""Small hand-built cluster states for the Hexgen policy tests."""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult
from flowserve.policies.queue import FCFS
from flowserve.profiles.cost_model import cost_model_for
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types import InstanceSpec, LLMCall, Query
from flowserve.view import CallState, ClusterView, InstanceState, QueryState

MODEL = "llama-3.1-70b"


class Program:
    """A workflow program that starts with `first` nodes and expects `expected` more calls."""

    def __init__(self, first: Sequence[Node] = (), expected: Sequence[CallEstimate] = ()) -> None:
        self.first = list(first)
        self.expected = list(expected)

    def start(self) -> Sequence[Node]:
        return self.first

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        return []

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return self.expected


def instance(name: str, gpu: str = "A100-80G", queue: object | None = None) -> InstanceState:
    spec = InstanceSpec(name, gpu, MODEL, 8)
    q = FCFS() if queue is None else queue  # a queue is falsy while empty
    return InstanceState(spec, cost_model_for(gpu, MODEL, 8), q, True)  # type: ignore[arg-type]


def view_of(*instances: InstanceState, queries: Sequence[QueryState] = (), now: float = 0.0) -> ClusterView:
    v = ClusterView({i.name: i for i in instances}, OutputPredictor(), {q.id: q for q in queries}, None)
    v.now = now
    return v


def query(qid: int, arrival: float = 0.0, deadline: float | None = None,
          program: Program | None = None) -> QueryState:
    return QueryState(Query(qid, arrival, "wf", program or Program(), deadline))


def call(cid: int, qs: QueryState, costs: dict[InstanceState, float], enqueued: float = 0.0,
         node: str | None = None, stage: str = "s") -> CallState:
    """A call of `qs` with the given predicted compute time on each instance."""
    c = LLMCall(cid, qs.id, node or f"n{cid}", stage, "wf", (1, 2, 3), 10, 10)
    cs = CallState(c, qs, enqueued)
    cs.enqueued = enqueued
    for inst, t in costs.items():
        cs.costs[inst.profile] = t
    qs.inflight[cid] = cs
    return cs


def llm_node(key: str) -> LLMNode:
    return LLMNode(key, "s", (1, 2, 3), 10)
