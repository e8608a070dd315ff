"""One tuning simulation: the metric by hand, a run to the end, and a run the median pruner
stops once finished trials did better at the same share of queries."""

from __future__ import annotations

import math

import optuna
import pytest

from flowserve.config import load_cluster
from flowserve.sim.run import PolicySpec
from flowserve.tune.splits import split_by_arrival
from flowserve.tune.trials import Pruning, SearchJob, Task, latency_metric, prepare, run_task
from flowserve.workloads import load_workload

CLUSTER = load_cluster("preble-a6000")


def test_latency_metric_by_hand() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert latency_metric(xs, "mean") == 4.0
    assert latency_metric(xs, "p90") == pytest.approx(7.6)  # numpy's linear interpolation: 4 + 0.6 × 6
    assert latency_metric([], "mean") == math.inf


@pytest.fixture(scope="module")
def job() -> SearchJob:
    wl = load_workload("tool_use", {"queries": 60, "rate": 8.0, "seed": 43})
    return SearchJob(CLUSTER, prepare(split_by_arrival(wl), CLUSTER, None))


def test_a_run_reports_its_running_metric_and_ends_with_the_metric(job: SearchJob) -> None:
    out = run_task(job, Task("fit", PolicySpec("round_robin", "fcfs")))
    assert not out.pruned and out.error is None
    assert [s for s, _ in out.reports] == list(range(1, 7))  # 21 queries: a report every 3, the last is the end
    assert math.isfinite(out.value) and out.value > 0


def finished(value: float, reports: list[tuple[int, float]]) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(value=value, intermediate_values=dict(reports))


def test_the_pruner_stops_a_run_behind_the_finished_ones(job: SearchJob) -> None:
    ahead = [finished(0.01, [(s, 0.01) for s in range(1, 7)]) for _ in range(3)]
    out = run_task(job, Task("fit", PolicySpec("round_robin", "fcfs"), Pruning(tuple(ahead), 2, 2)))
    assert out.pruned and [s for s, _ in out.reports] == [1, 2]  # no pruning before step 2 (warm-up), then pruned
    unpruned = run_task(job, Task("fit", PolicySpec("round_robin", "fcfs"), Pruning(tuple(ahead), 5, 2)))
    assert not unpruned.pruned  # fewer finished trials than the pruner's start-up


def test_a_value_a_part_refuses_fails_the_run_alone(job: SearchJob) -> None:
    out = run_task(job, Task("fit", PolicySpec({"scorers": [{"name": "uncached_work", "w_free": 3}]}, "fcfs")))
    assert out.value == math.inf and "w_free" in (out.error or "")
