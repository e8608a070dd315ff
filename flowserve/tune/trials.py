"""One simulation of `flowserve tune`: a dispatch policy on one part of the split trace,
reduced to the tuning metric, and stopped early when optuna's pruner says so.

The search runs these in worker processes (`flowserve.tune.profile_search`); everything
a worker needs is the `SearchJob` it inherits and a `Task`. A task of the search carries
the trials finished so far: the worker rebuilds a study of them, reports the running
metric every tenth of the queries completed, and stops the simulation when the median
pruner would (optuna's `MedianPruner` on those trials, exactly as in one process).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from flowserve.errors import ConfigError
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.simulator import QueryOutcome
from flowserve.tune.alpha import JOBS
from flowserve.tune.splits import Splits
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

Metric = Literal["mean", "p90", "p99"]
METRICS: tuple[Metric, ...] = ("mean", "p90", "p99")
SplitName = Literal["fit", "validation", "test"]
REPORTS = 10  # intermediate values per simulation: one per tenth of the queries completed


def latency_metric(latencies: Sequence[float], metric: Metric) -> float:
    """The tuning objective over query latencies (lower is better): their mean or a percentile."""
    if not latencies:
        return math.inf
    if metric == "mean":
        return float(np.mean(latencies))
    return float(np.percentile(latencies, 90 if metric == "p90" else 99))


@dataclass(frozen=True)
class SplitPart:
    """One part of the split trace, ready to simulate: its queries alone and their deadlines."""

    workload: Workload
    standalone: tuple[float, ...]
    deadlines: tuple[float | None, ...] | None


def prepare(splits: Splits, cluster: Sequence[InstanceSpec], slo_scale: float | None) -> dict[SplitName, SplitPart]:
    """Each part with its standalone latencies and, with `slo_scale`, deadlines of that many
    standalone latencies (batch queries have none)."""
    out: dict[SplitName, SplitPart] = {}
    for name, wl in (("fit", splits.fit), ("validation", splits.validation), ("test", splits.test)):
        alone = tuple(standalone_times(wl, cluster))
        deadlines = None if slo_scale is None else tuple(
            None if q.cls == "batch" else slo_scale * a for q, a in zip(wl.queries, alone, strict=True))
        out[name] = SplitPart(wl, alone, deadlines)  # type: ignore[index]
    return out


@dataclass(frozen=True)
class SearchJob:
    """What every simulation of one tuning run shares."""

    cluster: tuple[InstanceSpec, ...]
    parts: Mapping[SplitName, SplitPart]
    metric: Metric = "mean"


@dataclass(frozen=True)
class Pruning:
    """The trials finished before this one (optuna `FrozenTrial`s) and the median pruner's settings."""

    trials: tuple[Any, ...] = ()
    startup_trials: int = 5
    warmup_steps: int = 3


@dataclass(frozen=True)
class Task:
    split: SplitName
    policy: PolicySpec
    pruning: Pruning | None = None  # None: run to the end


@dataclass(frozen=True)
class TrialOutcome:
    """A simulation's metric (inf: a part refused a value, `error` says which), the running
    metric it reported, and whether the pruner stopped it."""

    value: float
    reports: tuple[tuple[int, float], ...] = field(default_factory=tuple)
    pruned: bool = False
    error: str | None = None


class _Pruned(Exception):
    """Raised from the simulation's query callback to stop it."""


def run_task(job: SearchJob, task: Task) -> TrialOutcome:
    """Simulate the task's policy on its part of the trace."""
    part = job.parts[task.split]
    n = len(part.workload.queries)
    every = max(1, math.ceil(n / REPORTS))
    latencies: list[float] = []
    reports: list[tuple[int, float]] = []
    trial = _pruning_trial(task.pruning) if task.pruning is not None else None

    def done(q: QueryOutcome) -> None:
        latencies.append(q.latency)
        if len(latencies) % every or len(latencies) == n:
            return
        step = len(latencies) // every
        value = latency_metric(latencies, job.metric)
        reports.append((step, value))
        if trial is not None:
            trial.report(value, step)
            if trial.should_prune():
                raise _Pruned

    try:
        res = simulate(job.cluster, part.workload, task.policy, None, part.standalone, done, record_calls=False,
                       deadlines=part.deadlines, jobs=JOBS)
    except _Pruned:
        return TrialOutcome(latency_metric(latencies, job.metric), tuple(reports), pruned=True)
    except ConfigError as e:
        return TrialOutcome(math.inf, tuple(reports), error=str(e))
    return TrialOutcome(latency_metric([q.latency for q in res.queries], job.metric), tuple(reports))


def _pruning_trial(p: Pruning) -> Any:
    """A trial of a study holding the finished trials, under the median pruner."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", pruner=optuna.pruners.MedianPruner(
        n_startup_trials=p.startup_trials, n_warmup_steps=p.warmup_steps))
    study.add_trials(list(p.trials))
    return study.ask()
