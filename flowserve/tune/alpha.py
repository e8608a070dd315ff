"""Choosing Hexgen's α by replaying a trace in the simulator (paper §4.3, Eq. 8).

`sweep_alpha` is a pure function of its job (trace, cluster, cost models, policy): it
simulates the trace under `hexgen_wb` with fixed α over a coarse grid {0, 0.2, …, 1},
then ±0.1 around the best, and returns the α with the lowest mean simulated latency
(ties: the smaller α). `latency_regressed` is the one-sided Welch t-test that decides
when a later window needs re-tuning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flowserve.errors import ConfigError
from flowserve.policies import queue_factory
from flowserve.policies.hexgen import DEFAULT_BETA
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.tune.job import ALPHA_SWEEP, COARSE, FINE_STEP, SweepJob, SweepResult
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.recorded import read_jsonl_trace


def mean_latency(job: SweepJob, alpha: float, standalone: Sequence[float] | None = None) -> float:
    """Eq. 8's objective: mean latency of the trace's queries under hexgen_wb with this α
    (a failed query counts as never finishing)."""
    policy = PolicySpec("hexgen_wb", job.queue, {"alpha": alpha, "beta": job.beta}, job.queue_params)
    if standalone is None:
        standalone = standalone_times(job.workload, job.cluster, job.cost_models)
    res = simulate(job.cluster, job.workload, policy, None, standalone, record_calls=False,
                   cost_models=job.cost_models, deadlines=job.deadlines)
    if any(q.failed for q in res.queries) or not res.queries:
        return math.inf
    return sum(q.latency for q in res.queries) / len(res.queries)


def sweep_alpha(job: SweepJob) -> SweepResult:
    """Eq. 8 over the trace: the α of lowest mean simulated latency, coarse to fine."""
    if not job.workload.queries:
        raise ConfigError("cannot tune α on an empty trace")
    standalone = standalone_times(job.workload, job.cluster, job.cost_models)
    results = coarse_to_fine(lambda a: mean_latency(job, a, standalone), job.coarse, job.fine_step)
    return SweepResult(best_alpha(results), results, len(job.workload.queries), job.workload.calls)


def coarse_to_fine(objective: Callable[[float], float], coarse: Sequence[float] = COARSE,
                   step: float = FINE_STEP) -> dict[float, float]:
    """Evaluate the coarse grid, then ±step around its best (within [0, 1]); returns every
    evaluated α with its objective, in evaluation order."""
    results: dict[float, float] = {}

    def run(a: float) -> None:
        a = round(min(max(a, 0.0), 1.0), 6)
        if a not in results:
            results[a] = objective(a)

    for a in coarse:
        run(a)
    best = best_alpha(results)
    for a in (best - step, best + step):
        run(a)
    return results


def best_alpha(results: Mapping[float, float]) -> float:
    """argmin of the mean latency; the smaller α among equals."""
    return min(results, key=lambda a: (results[a], a))


def tune_trace(cluster: Sequence[InstanceSpec], trace: str, queue: str = "urgency",
               beta: float | None = None, slo_scale: float | None = None) -> tuple[SweepResult, float]:
    """`flowserve tune alpha`: sweep a recorded JSONL trace; returns the result and its wall time."""
    queue_factory(queue)  # a clear error for an unknown name, before any work
    if slo_scale is not None and not slo_scale > 0:
        raise ConfigError(f"--slo-scale must be positive, got {slo_scale}")
    if beta is not None and not beta > 0:
        raise ConfigError(f"--beta must be positive, got {beta}")
    wl = read_jsonl_trace(trace)  # a simulation's trace, or one the gateway recorded
    deadlines = None
    if slo_scale is not None:
        deadlines = tuple(slo_scale * s for s in standalone_times(wl, cluster))
    job = SweepJob(wl, tuple(cluster), None, deadlines, queue, beta=beta or DEFAULT_BETA)
    t0 = time.perf_counter()
    result = sweep_alpha(job)
    return result, time.perf_counter() - t0


JOBS: dict[str, Callable[..., Any]] = {ALPHA_SWEEP: sweep_alpha}  # the RunJob registry drivers use
