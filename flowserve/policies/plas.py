"""Program-level attained service: Autellix's PLAS and ATLAS (Luo et al., 2025, "Autellix:
An Efficient Serving Engine for LLM Agents as General Programs", §4.1–4.2).

A program's calls are ordered by the service its program has already had — least first,
like least-attained-service scheduling of processes — so short programs are not stuck
behind long ones, with no knowledge of how long a program will run:

* PLAS (`plas`): a call's priority is its program's attained service, the engine seconds
  of its finished calls (single-threaded programs);
* ATLAS (`atlas`): the service attained along the critical path to the call — the most
  any of its finished dependencies accumulated — so the threads that hold a
  multi-threaded program back go first.

As in Autellix, priorities are discretised into `levels` queues (level i holds service
in [q·g^(i−1), q·g^i), `quantum_s` q and `growth` g; FCFS inside a level), and a call
whose wait exceeds `starvation` × its program's service (at least one quantum) is
promoted to the first level. The quantum defaults to the engine seconds one call takes,
as observed on the programs served (`ServiceMeter`; the first call's predicted service
before any finished): a fixed second would put every short program of a fast engine in
the first level, where the order is FCFS. Autellix also preempts running calls at quantum ends; the
core releases calls to engines and never preempts them, so only the queue order applies.
The core keeps the accounts (`QueryState.service_s`, `QueryState.path_service`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import QueuePolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.queue_books import ServiceMeter


def priority_level(service_s: float, quantum_s: float, growth: float, levels: int) -> int:
    """Autellix's discretised priority: 0 below one quantum, then one level per factor
    `growth` of attained service, the last level open-ended."""
    if service_s < quantum_s:
        return 0
    return min(levels - 1, 1 + int(math.log(service_s / quantum_s, growth)))


def starved(waited_s: float, service_s: float, quantum_s: float, ratio: float) -> bool:
    """Autellix's anti-starvation test: waited ≥ ratio × max(attained service, one quantum)."""
    return waited_s >= ratio * max(service_s, quantum_s)


class PLASQueue(QueuePolicy):
    """Least attained program service first (see the module docstring)."""

    name = "plas"
    path = False  # ATLAS: attained service along the critical path

    def __init__(self, quantum_s: Annotated[float | None, Help("the first level's attained service, seconds; "
                                                               "null: one call's service as observed")] = None,
                 growth: Annotated[float, Help("each level's service is this × the previous one's (> 1)")] = 2.0,
                 levels: Annotated[int, Help("priority levels, ≥ 1")] = 8,
                 starvation: Annotated[float, Help("a call that waited this × its program's service (at least "
                                                   "one quantum) is promoted (> 0)")] = 8.0) -> None:
        if (quantum_s is not None and quantum_s <= 0) or growth <= 1 or levels < 1 or starvation <= 0:
            raise ValueError(f"need quantum_s > 0 (or none: observed), growth > 1, levels ≥ 1 and starvation > 0; "
                             f"got {quantum_s}, {growth}, {levels}, {starvation}")
        self.quantum_s, self.growth, self.levels, self.starvation = quantum_s, growth, levels, starvation
        self._q: dict[int, CallState] = {}
        self._meter = ServiceMeter()
        self._first: float | None = None  # the first call's predicted service (before any finished)

    def quantum(self) -> float:
        """`quantum_s`, or the observed engine seconds per call."""
        if self.quantum_s is not None:
            return self.quantum_s
        return self._meter.mean_s(self._first or 1.0)

    def service(self, cs: CallState) -> float:
        qs = cs.query
        return qs.path_service(cs.node.deps) if self.path else qs.service_s

    def push(self, cs: CallState) -> None:
        self._q[cs.id] = cs
        self._meter.saw(cs)
        if self._first is None and cs.t_comp > 0:
            self._first = cs.t_comp

    def remove(self, cs: CallState, released: bool) -> None:
        del self._q[cs.id]

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[CallState]:
        return iter(self._q.values())

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        best, best_key = None, (math.inf, math.inf)
        now = view.now
        quantum = self.quantum()
        for cs in self._q.values():
            service = self.service(cs)
            level = 0 if starved(now - cs.enqueued, service, quantum, self.starvation) else \
                priority_level(service, quantum, self.growth, self.levels)
            key = (level, cs.enqueued)
            if key < best_key:
                best, best_key = cs, key
        return best


class ATLASQueue(PLASQueue):
    name = "atlas"
    path = True
