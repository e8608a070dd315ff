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
from flowserve.graph.plan import CallStep, Materializer, QueryPlan


class WorkflowProgram(Protocol):
    def start(self) -> Sequence[Node]: ...

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]: ...

    def expected_remaining(self) -> Sequence[CallEstimate]: ...


# Expected calls still to come, given how many calls of each stage were issued so far.
Expectation = Callable[[Mapping[str, int], Mapping[str, object]], Sequence[CallEstimate]]


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
        nodes: list[Node] = []
        for j, item in enumerate(self.plan.steps[i]):
            key = f"s{i}.{j}"
            if isinstance(item, CallStep):
                nodes.append(
                    LLMNode(
                        key,
                        item.stage,
                        self._mat.prompt(item.prompt),
                        max_tokens=max(item.output_tokens, 1),
                        deps=self._prev_keys,
                        model=self._model,
                        sim_output=item.output_tokens,
                    )
                )
                self._issued[item.stage] = self._issued.get(item.stage, 0) + 1
            else:
                nodes.append(
                    OpNode(key, item.stage, item.op, deps=self._prev_keys,
                           sim_duration=item.duration_s, sim_error=item.error)
                )
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
