"""One policy on one workload and cluster across SLO scales: the unit of every report.

A policy that reads deadlines runs once per scale it is measured at. By default
(`search=True`) those are the largest scale (the run latency and throughput come from)
and a bisection of the grid for the smallest scale reaching each reported attainment
(95%, 99%): about 2·log2(n) runs instead of n, the same minimum scales wherever
attainment grows with the scale (looser deadlines, no fewer met). The curve then holds
the scales that ran; `search=False` runs every scale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flowserve.metrics.summary import EPS, attainment, min_slo_scale, slo_curve, stage_distribution, summarize
from flowserve.sim.kv_views import CacheView
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.simulator import SimResult
from flowserve.tune.alpha import JOBS
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

DEFAULT_SLO_SCALES = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)
TARGETS = (0.95, 0.99)  # the attainments whose minimum scale every report quotes


def evaluate(
    cluster: Sequence[InstanceSpec],
    workload: Workload,
    policy: PolicySpec,
    scales: Sequence[float] = DEFAULT_SLO_SCALES,
    standalone: Sequence[float] | None = None,
    progress: Callable[[], None] | None = None,
    search: bool = True,
    cache_view: CacheView | None = None,
) -> tuple[dict[str, Any], dict[float, SimResult]]:
    """Run the policy (at the scales it needs if it reads deadlines) and summarise; cache_view:
    how the router learns what the engines cache (`flowserve.sim.kv_views`; None: each as configured).

    Latency, throughput and call figures come from the run at the largest scale.
    """
    if standalone is None:
        standalone = standalone_times(workload, cluster)
    scales = sorted(set(float(s) for s in scales))
    aware = policy.uses_deadline()
    runs: dict[float, SimResult] = {}
    if aware:
        def run(s: float) -> float:
            if s not in runs:
                runs[s] = simulate(cluster, workload, policy, s, standalone, jobs=JOBS, cache_view=cache_view)
                if progress:
                    progress()
            return attainment(runs[s], s, True)

        if search:
            for target in TARGETS:
                bisect_first(scales, lambda s, target=target: run(s) >= target - EPS)
            for _ in range(len(scales) - len(runs)):  # the scales the search skipped
                if progress:
                    progress()
        else:
            for s in scales:
                run(s)
    else:
        result = simulate(cluster, workload, policy, None, standalone, jobs=JOBS, cache_view=cache_view)
        runs = dict.fromkeys(scales, result)
        if progress:
            for _ in scales:
                progress()
    runs = dict(sorted(runs.items()))
    curve = slo_curve(runs, aware)
    primary = runs[scales[-1]]
    summary = summarize(primary)
    summary.update({
        "policy": policy.describe(),
        "workload": workload.name,
        "deadline_aware": aware,
        "slo_attainment": curve,
        "min_slo_scale": {str(t): min_slo_scale(curve, t) for t in TARGETS},
        "sim_wall_s": sum(r.sim_wall_s for r in {id(r): r for r in runs.values()}.values()),
        "stage_distribution": stage_distribution(primary),
        **({"cache_view": cache_view} if cache_view is not None else {}),
    })
    return summary, runs


def bisect_first(grid: Sequence[float], ok: Callable[[float], bool]) -> float | None:
    """The first grid value where `ok` holds, for an `ok` false then true along the grid
    (None if it never holds); asks the last value first, then halves the bracket, so the
    value just below the answer is asked too (the minimum scale interpolates from it)."""
    if not grid or not ok(grid[-1]):
        return None
    lo, hi = -1, len(grid) - 1  # ok(grid[lo]) false (or before the grid), ok(grid[hi]) true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(grid[mid]):
            hi = mid
        else:
            lo = mid
    return grid[hi]
