"""Plans as workflows: the workflow every generated or recorded workload runs.

`PlanWorkflow` runs a `QueryPlan` step by step, revealing a step only when the
previous one finished (so the scheduler learns of revise rounds as they happen, as in
production), or a `DagPlan` all at once with its dependencies. Its prompts are the
plan's segments; the true output lengths and tool outcomes go to the driver as the
plan's oracle (`plan_oracle`), never into the nodes: an LLM node asks for up to
`max_tokens` like any workflow's would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from flowserve.graph.nodes import CallEstimate, NodeResult
from flowserve.graph.oracle import TableOracle, ToolOutcome
from flowserve.graph.plan import CallStep, DagPlan, OpStep, Plan, QueryPlan
from flowserve.graph.workflow import Graph, Workflow

# Expected calls still to come, given how many calls of each stage were issued so far.
Expectation = Callable[[Mapping[str, int], Mapping[str, object]], Sequence[CallEstimate]]

PLAN_MAX_TOKENS = 16_384  # the cap a plan's calls ask for; the oracle knows the truth
TOOL_ERROR = "sql error"  # what a plan's failing tool step reports


def _key(i: int, j: int) -> str:
    return f"s{i}.{j}"


class PlanWorkflow(Workflow):
    """Runs a plan (see the module docstring).

    Without an `expectation`, a staged plan reports its unrevealed steps exactly: the
    application knows its own static structure.
    """

    name = "plan"  # drivers register it under this name (`WorkflowRef("plan", (plan, expectation, model, learned))`)

    def __init__(self, plan: Plan, expectation: Expectation | None = None, model: str | None = None,
                 learned: bool = False) -> None:
        """learned: the core predicts its remaining calls from finished queries of its
        workflow (a recorded program, replayed as the gateway sees programs live)."""
        self.plan = plan
        self.attrs = plan.attrs
        self._expect = expectation
        self.learns_remaining = learned
        self._model = model
        self._next = 0
        self._open: set[str] = set()
        self._prev: tuple[str, ...] = ()
        self._issued: dict[str, int] = {}
        self._done: set[str] = set()

    def start(self, g: Graph) -> None:
        if isinstance(self.plan, DagPlan):
            for n in self.plan.nodes:
                self._step(g, n.key, n.item, n.deps)
        else:
            self._reveal(g)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        self._done.add(key)
        if isinstance(self.plan, QueryPlan):
            self._open.discard(key)
            if not self._open:
                self._reveal(g)

    def _reveal(self, g: Graph) -> None:
        assert isinstance(self.plan, QueryPlan)
        if self._next >= len(self.plan.steps):
            return
        i = self._next
        self._next += 1
        keys = tuple(_key(i, j) for j in range(len(self.plan.steps[i])))
        for key, item in zip(keys, self.plan.steps[i], strict=True):
            self._step(g, key, item, self._prev)
        self._prev = keys
        self._open = set(keys)

    def _step(self, g: Graph, key: str, item: CallStep | OpStep, deps: Sequence[str]) -> None:
        if isinstance(item, CallStep):
            self._issued[item.stage] = self._issued.get(item.stage, 0) + 1
            g.llm(key, item.prompt, max_tokens=PLAN_MAX_TOKENS, stage=item.stage, after=deps, model=self._model)
        else:
            g.tool(key, item.op, stage=item.stage, after=deps)

    def expected_remaining(self) -> Sequence[CallEstimate]:
        if self._expect is not None:
            return self._expect(self._issued, self.plan.attrs)
        if isinstance(self.plan, DagPlan):
            return [CallEstimate(n.item.stage, n.item.input_tokens) for n in self.plan.nodes
                    if isinstance(n.item, CallStep) and n.key not in self._done]
        return [CallEstimate(item.stage, item.input_tokens)
                for step in self.plan.steps[self._next:] for item in step if isinstance(item, CallStep)]


def plan_oracle(plan: Plan) -> TableOracle:
    """The true outputs and tool outcomes of a plan, keyed like `PlanWorkflow`'s nodes."""
    if isinstance(plan, DagPlan):
        items = [(n.key, n.item) for n in plan.nodes]
    else:
        items = [(_key(i, j), item) for i, step in enumerate(plan.steps) for j, item in enumerate(step)]
    outputs = {k: it.output_tokens for k, it in items if isinstance(it, CallStep)}
    tools = {k: ToolOutcome(it.duration_s, TOOL_ERROR if it.error else None)
             for k, it in items if isinstance(it, OpStep)}
    return TableOracle(outputs, tools)
