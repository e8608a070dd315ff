"""One policy on one workload and cluster across SLO scales: the unit of every report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flowserve.metrics.summary import min_slo_scale, slo_curve, stage_distribution, summarize
from flowserve.sim.kv_views import CacheView
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.simulator import SimResult
from flowserve.tune.alpha import JOBS
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

DEFAULT_SLO_SCALES = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50)


def evaluate(
    cluster: Sequence[InstanceSpec],
    workload: Workload,
    policy: PolicySpec,
    scales: Sequence[float] = DEFAULT_SLO_SCALES,
    standalone: Sequence[float] | None = None,
    progress: Callable[[], None] | None = None,
    cache_view: CacheView | None = None,
) -> tuple[dict[str, Any], dict[float, SimResult]]:
    """Run the policy (once per scale if it reads deadlines) and summarise; cache_view: how
    the router learns what the engines cache (`flowserve.sim.kv_views`; None: each as configured).

    Latency, throughput and call figures come from the run at the largest scale.
    """
    if standalone is None:
        standalone = standalone_times(workload, cluster)
    scales = sorted(set(float(s) for s in scales))
    aware = policy.uses_deadline()
    runs: dict[float, SimResult] = {}
    if aware:
        for s in scales:
            runs[s] = simulate(cluster, workload, policy, s, standalone, jobs=JOBS, cache_view=cache_view)
            if progress:
                progress()
    else:
        result = simulate(cluster, workload, policy, None, standalone, jobs=JOBS, cache_view=cache_view)
        runs = dict.fromkeys(scales, result)
        if progress:
            for _ in scales:
                progress()
    curve = slo_curve(runs, aware)
    primary = runs[scales[-1]]
    summary = summarize(primary)
    summary.update({
        "policy": policy.describe(),
        "workload": workload.name,
        "deadline_aware": aware,
        "slo_attainment": curve,
        "min_slo_scale": {"0.95": min_slo_scale(curve, 0.95), "0.99": min_slo_scale(curve, 0.99)},
        "sim_wall_s": sum(r.sim_wall_s for r in {id(r): r for r in runs.values()}.values()),
        "stage_distribution": stage_distribution(primary),
        **({"cache_view": cache_view} if cache_view is not None else {}),
    })
    return summary, runs
