"""The tuning split: the first half by arrival to fit (70%) and validate (30%) on, the second
held out; every part starts at 0."""

from __future__ import annotations

import pytest

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.tune.splits import split_by_arrival
from flowserve.workloads.base import QuerySpec, Workload


def workload(arrivals: list[float]) -> Workload:
    plan = QueryPlan("w", ((CallStep("s", (Segment(1, 10),), 4),),))
    return Workload("w", tuple(QuerySpec(i, t, plan) for i, t in enumerate(arrivals)))


def test_split_by_hand() -> None:
    # ids 0..19 arrive in reverse: the split follows arrival time, not file order
    s = split_by_arrival(workload([float(20 - i) for i in range(20)]))
    assert [q.id for q in s.fit.queries] == [19, 18, 17, 16, 15, 14, 13]  # round(10 × 0.7)
    assert [q.id for q in s.validation.queries] == [12, 11, 10]
    assert [q.id for q in s.test.queries] == list(range(9, -1, -1))
    assert [q.arrival for q in s.test.queries][:3] == [0.0, 1.0, 2.0]  # 11, 12, 13 → from 0
    assert s.fit.name == "w [fit]"


def test_a_short_trace_is_refused() -> None:
    with pytest.raises(ConfigError, match="7 queries; tuning needs at least 8"):
        split_by_arrival(workload([float(i) for i in range(7)]))


def test_the_smallest_trace_leaves_two_queries_to_each_tuning_part() -> None:
    s = split_by_arrival(workload([float(i) for i in range(8)]))
    assert (len(s.fit.queries), len(s.validation.queries), len(s.test.queries)) == (2, 2, 4)
