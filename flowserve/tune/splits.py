"""A trace split by arrival time for tuning: the first half to fit on (its earlier part
for the search, its later part to validate the winner on), the second half held out to
report on, so a tuned profile is never judged on the queries it was fitted to.

Each part is a workload of its own, its arrivals shifted to start at 0: every simulation
starts from an empty cluster, the default's and the tuned profile's alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.errors import ConfigError
from flowserve.workloads.base import QuerySpec, Workload

MIN_QUERIES = 8  # two per validation and fit part at the least, four held out


@dataclass(frozen=True)
class Splits:
    fit: Workload  # the search's
    validation: Workload  # the guard's: the tuned profile must beat the default here
    test: Workload  # held out: the report's


def part(workload: Workload, queries: Sequence[QuerySpec], name: str) -> Workload:
    """These queries as a workload of their own, the first arriving at 0."""
    start = min(q.arrival for q in queries)
    shifted = tuple(dataclasses.replace(q, arrival=q.arrival - start) for q in queries)
    return dataclasses.replace(workload, name=f"{workload.name} [{name}]", queries=shifted)


def split_by_arrival(workload: Workload, fit_share: float = 0.7) -> Splits:
    """First half by arrival (ties by id) → fit (its first `fit_share`) and validation; second
    half → test. ConfigError for a trace too short to split."""
    qs = sorted(workload.queries, key=lambda q: (q.arrival, q.id))
    if len(qs) < MIN_QUERIES:
        raise ConfigError(f"{workload.name}: {len(qs)} queries; tuning needs at least {MIN_QUERIES} (the first half "
                          "to fit and validate on, the second held out)")
    half = len(qs) // 2
    cut = min(max(round(half * fit_share), 2), half - 2)
    return Splits(part(workload, qs[:cut], "fit"), part(workload, qs[cut:half], "validation"),
                  part(workload, qs[half:], "test"))
