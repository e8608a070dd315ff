"""What a workload is: queries with arrival times and plans, plus what the scheduler may
know about them in advance (expected remaining calls, output-length priors)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.graph.oracle import NO_ORACLE, Oracle
from flowserve.graph.plan import CallStep, Plan
from flowserve.graph.replay import Expectation, PlanWorkflow
from flowserve.graph.workflow import Workflow
from flowserve.types.work import LatencySLO, QueryClass, WorkflowRef


@dataclass(frozen=True)
class AppQuery:
    """A query of a workflow written once (an app: Text-to-SQL, RAG, LLM-in-SQL), for the
    simulator: a fresh workflow object per run, and the oracle of what only a simulated
    run knows (true output lengths, tool durations and results). The same workflow
    class serves live requests in the gateway.

    `standalone_s`, the query's latency alone (the SLO's unit), is measured by
    simulating the query alone on each kind of instance when None."""

    workflow: str
    make: Callable[[], Workflow]
    oracle: Oracle = NO_ORACLE
    standalone_s: float | None = None
    expected_calls: int = 0  # for workload statistics only
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def calls(self) -> list[CallStep]:
        return []


@dataclass(frozen=True, slots=True)
class QuerySpec:
    id: int
    arrival: float
    plan: Plan | AppQuery
    tenant: str = "default"
    priority: int = 0
    cls: QueryClass = "interactive"
    slo: LatencySLO | None = None  # per-call TTFT/TPOT objectives (`flowserve.workloads.latency_slos`)
    model: str | None = None  # the model (or LoRA adapter) its calls name; None: any instance


@dataclass(frozen=True)
class Workload:
    name: str
    queries: tuple[QuerySpec, ...]
    expectations: Mapping[str, Expectation] = field(default_factory=dict)
    output_priors: Mapping[tuple[str, str], float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the generator decided for the user (printed by the CLI)
    # workflows whose remaining calls the core learns from the queries that finish (recorded
    # programs replayed as the gateway sees them live), instead of from `expectations`
    learned: frozenset[str] = frozenset()

    def plan_ref(self, plan: Plan, model: str | None = None) -> WorkflowRef:
        """How a query replaying `plan` names its workflow (`PlanWorkflow`, registered under
        its name by both drivers), with what this workload lets the core expect of it."""
        return WorkflowRef(PlanWorkflow.name, (plan, self.expectations.get(plan.workflow), model,
                                               plan.workflow in self.learned))

    @property
    def calls(self) -> int:
        return sum(q.plan.expected_calls if isinstance(q.plan, AppQuery) else len(q.plan.calls())
                   for q in self.queries)


class SegmentIds:
    """Allocates segment ids; shared segments get stable ids by name."""

    def __init__(self, first_unique: int = 100_000) -> None:
        self._named: dict[str, int] = {}
        self._next = first_unique

    def shared(self, name: str) -> int:
        if name not in self._named:
            self._named[name] = len(self._named) + 1
        return self._named[name]

    def unique(self) -> int:
        self._next += 1
        return self._next
