"""What a workload is: queries with arrival times and plans, plus what the scheduler may
know about them in advance (expected remaining calls, output-length priors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flowserve.graph.plan import Plan
from flowserve.graph.replay import Expectation
from flowserve.types import QueryClass


@dataclass(frozen=True, slots=True)
class QuerySpec:
    id: int
    arrival: float
    plan: Plan
    tenant: str = "default"
    priority: int = 0
    cls: QueryClass = "interactive"


@dataclass(frozen=True)
class Workload:
    name: str
    queries: tuple[QuerySpec, ...]
    expectations: Mapping[str, Expectation] = field(default_factory=dict)
    output_priors: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return sum(len(q.plan.calls()) for q in self.queries)


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
