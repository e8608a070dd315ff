"""A query's own workflow logic: which nodes to run first and how the graph grows.

The runtime asks a program for its first nodes, then tells it each finished node; the
program answers with the nodes that finishing it unlocks (self-correction rounds, a
variable number of candidates, a branch). `expected_remaining` reports the calls the
program still expects to make, so deadline-aware policies can budget for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult, OpNode
from flowserve.graph.plan import CallStep, DagPlan, Materializer, OpStep, Plan, QueryPlan


class WorkflowProgram(Protocol):
    def start(self) -> Sequence[Node]: ...

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]: ...

    def expected_remaining(self) -> Sequence[CallEstimate]: ...


# Expected calls still to come, given how many calls of each stage were issued so far.
Expectation = Callable[[Mapping[str, int], Mapping[str, object]], Sequence[CallEstimate]]


def make_node(key: str, item: CallStep | OpStep, deps: tuple[str, ...], mat: Materializer,
              model: str | None = None) -> Node:
    if isinstance(item, CallStep):
        return LLMNode(key, item.stage, mat.prompt(item.prompt), max_tokens=max(item.output_tokens, 1),
                       deps=deps, model=model, sim_output=item.output_tokens)
    return OpNode(key, item.stage, item.op, deps=deps, sim_duration=item.duration_s, sim_error=item.error)


class StagedProgram:
    """Runs a `QueryPlan` step by step, revealing a step only when the previous finished
    (so the scheduler learns of e.g. revise rounds as they happen, like in production).

    Without an `expectation`, the program reports its unrevealed steps exactly: the
    application knows its own static structure.
    """

    def __init__(
        self,
        plan: QueryPlan,
        materializer: Materializer,
        expectation: Expectation | None = None,
        model: str | None = None,
    ) -> None:
        self.plan = plan
        self._mat = materializer
        self._expect = expectation
        self._model = model
        self._next = 0
        self._open: set[str] = set()
        self._prev_keys: tuple[str, ...] = ()
        self._issued: dict[str, int] = {}

    def start(self) -> Sequence[Node]:
        return self._reveal()

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        self._open.discard(node.key)
        return self._reveal() if not self._open else ()

    def _reveal(self) -> list[Node]:
        if self._next >= len(self.plan.steps):
            return []
        i = self._next
        self._next += 1
        nodes = [make_node(f"s{i}.{j}", item, self._prev_keys, self._mat, self._model)
                 for j, item in enumerate(self.plan.steps[i])]
        for item in self.plan.steps[i]:
            if isinstance(item, CallStep):
                self._issued[item.stage] = self._issued.get(item.stage, 0) + 1
        self._prev_keys = tuple(n.key for n in nodes)
        self._open = set(self._prev_keys)
        return nodes

    def expected_remaining(self) -> Sequence[CallEstimate]:
        if self._expect is not None:
            return self._expect(self._issued, self.plan.attrs)
        return [
            CallEstimate(item.stage, item.input_tokens)
            for step in self.plan.steps[self._next :]
            for item in step
            if isinstance(item, CallStep)
        ]


class DagProgram:
    """Runs a static `DagPlan`: all nodes with their dependencies at once; the runtime
    issues each when its dependencies finish."""

    def __init__(self, plan: DagPlan, materializer: Materializer, model: str | None = None) -> None:
        self.plan = plan
        self._mat = materializer
        self._model = model
        self._done: set[str] = set()

    def start(self) -> Sequence[Node]:
        return [make_node(n.key, n.item, n.deps, self._mat, self._model) for n in self.plan.nodes]

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        self._done.add(node.key)
        return ()

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return [CallEstimate(n.item.stage, n.item.input_tokens) for n in self.plan.nodes
                if isinstance(n.item, CallStep) and n.key not in self._done]


def program_for(plan: Plan, materializer: Materializer, expectation: Expectation | None = None,
                model: str | None = None) -> WorkflowProgram:
    if isinstance(plan, DagPlan):
        return DagProgram(plan, materializer, model)
    return StagedProgram(plan, materializer, expectation, model)
