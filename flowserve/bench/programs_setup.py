"""What `flowserve bench programs` runs, shared by its simulated and live halves: the
cluster, the programs' shape, the deadlines and the contestants."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from flowserve.host.settings import serve_config
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import SimResult
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload
from flowserve.workloads.program_trace import TracedQuery
from flowserve.workloads.programs import AGENT_SHAPE, PROGRAM_SLO_SCALE

CLUSTER = {"instances": [{"name": "a6000", "gpu": "A6000", "model": "llama-3.1-8b", "backend": "sim", "count": 4}]}
SHAPE = AGENT_SHAPE
SLO_SCALE = PROGRAM_SLO_SCALE
CONTESTANTS: dict[str, PolicySpec] = {
    "round_robin+fcfs": PolicySpec("round_robin", "fcfs"),
    "sglang_cache_aware": PolicySpec("sglang_cache_aware", "fcfs"),
    "llmd": PolicySpec("llmd", "fcfs"),
    "autellix PLAS": PolicySpec("autellix", "plas"),
    "autellix ATLAS": PolicySpec("autellix", "atlas"),
    "flowserve": PolicySpec("flowserve", "flowserve"),
}
BASELINE, OURS = "round_robin+fcfs", "flowserve"
RATES = {"full": (0.5, 1.0, 1.5, 2.0), "quick": (0.75, 1.5)}  # programs per second
DURATION_S = {"full": 150.0, "quick": 60.0}  # of arrivals
ATTAINED = 0.9  # near saturation: the best contestant still meets this share of deadlines


def cluster() -> tuple[InstanceSpec, ...]:
    return serve_config(dict(CLUSTER), "bench programs").instances


def with_deadlines(traced: Sequence[TracedQuery], alone: Sequence[float]) -> list[TracedQuery]:
    return [TracedQuery(q.calls, q.arrival, q.workflow, SLO_SCALE * a) for q, a in zip(traced, alone, strict=True)]


def figures(res: SimResult) -> dict[str, Any]:
    """Mean and p95 program latency, SLO attainment, hit rate and utilisation of one run."""
    lat = np.array([q.latency for q in res.queries if q.failed is None])
    prompt = sum(c.input_tokens for c in res.calls)
    busy = sum(i.busy_s for i in res.instances) / max(len(res.instances) * res.makespan, 1e-9)
    return {"programs": len(res.queries), "failed": sum(1 for q in res.queries if q.failed is not None),
            "mean_s": float(lat.mean()), "p95_s": float(np.percentile(lat, 95)),
            "attainment": float(np.mean([bool(q.met) for q in res.queries])),
            "hit_rate": sum(c.cached_tokens for c in res.calls) / max(prompt, 1), "utilisation": busy,
            "makespan_s": res.makespan}


def sim_run(wl: Workload, policy: PolicySpec, alone: Sequence[float]) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = figures(simulate(cluster(), wl, policy, SLO_SCALE, alone, record_calls=True))
    out["wall_s"] = time.perf_counter() - t0
    return out
