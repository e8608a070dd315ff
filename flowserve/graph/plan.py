"""Query plans: what a simulated (or replayed) query will do, step by step (the workload
format of generators and traces; `flowserve.graph.replay` runs a plan as a workflow).

A plan is a chain of steps; the items of one step run in parallel. Prompts are
sequences of segments, each standing for a run of distinct token ids, so the sharing
structure of prompts (a schema shared by a database's queries, a system prompt shared
by all) is explicit, cheap to materialise and serialisable into trace files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.graph.prompt import MAX_SEGMENT, Segment  # noqa: F401  (re-exported)
from flowserve.profiles.cost_model import CostModel
from flowserve.types.work import Tokens


@dataclass(frozen=True, slots=True)
class CallStep:
    stage: str
    prompt: tuple[Segment, ...]
    output_tokens: int

    @property
    def input_tokens(self) -> int:
        return sum(s.length for s in self.prompt)


@dataclass(frozen=True, slots=True)
class OpStep:
    stage: str
    op: str
    duration_s: float
    error: bool = False


Step = tuple[CallStep | OpStep, ...]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    workflow: str
    steps: tuple[Step, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def calls(self) -> list[CallStep]:
        return [item for step in self.steps for item in step if isinstance(item, CallStep)]


@dataclass(frozen=True, slots=True)
class DagNode:
    key: str
    item: CallStep | OpStep
    deps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DagPlan:
    """A static workflow graph: every node is known up front with its dependencies."""

    workflow: str
    nodes: tuple[DagNode, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def calls(self) -> list[CallStep]:
        return [n.item for n in self.nodes if isinstance(n.item, CallStep)]


Plan = QueryPlan | DagPlan


class Materializer:
    """Turns segment lists into token tuples.

    Segment s is the token −(s+1) followed by length−1 filler tokens 0. Two segments are
    equal exactly when their ids (and lengths) are, a shorter segment of the same id is a
    prefix of the longer one, and prompts diverge at the first token of the first
    differing segment — which is all prefix matching can observe. Building a prompt is
    then a few tuple slices of one shared int object: cheap, and cache-friendly when
    the radix trees compare long edges.
    """

    def segment(self, seg: Segment) -> Tokens:
        return self.prompt((seg,))

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out = [0] * sum(seg.length for seg in segments)
        pos = 0
        for seg in segments:
            out[pos] = -(seg.id + 1)
            pos += seg.length
        return tuple(out)


def item_time(item: CallStep | OpStep, cost: CostModel) -> float:
    if isinstance(item, CallStep):
        return cost.call_time(item.input_tokens, item.output_tokens)
    return item.duration_s


def standalone_latency(plan: Plan, cost: CostModel) -> float:
    """The query alone on one instance with a cold cache: the critical path, where
    parallel calls cost their slowest member (they share the batch)."""
    if isinstance(plan, DagPlan):
        finish: dict[str, float] = {}
        for node in plan.nodes:  # in topological order (validated when the plan is built)
            start = max((finish[d] for d in node.deps), default=0.0)
            finish[node.key] = start + item_time(node.item, cost)
        return max(finish.values(), default=0.0)
    return sum(max(item_time(item, cost) for item in step) for step in plan.steps)
