"""Metrics of a simulation (SPEC §6): per query, per call, and aggregates.

SLO attainment at scale s: the fraction of queries finishing within s × their
standalone latency. Deadline-aware policies see the deadline, so each scale is its own
run (`runs[s]`); for deadline-blind policies one run serves every scale and gives the
same numbers. The minimum scale reaching a target interpolates linearly between the
two grid scales around it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from flowserve.errors import FailureKind
from flowserve.sim.simulator import SimResult

EPS = 1e-9


def attainment(result: SimResult, scale: float, use_deadlines: bool) -> float:
    """Fraction of queries meeting scale × standalone (failed queries never do)."""
    qs = result.queries
    if not qs:
        return 0.0
    if use_deadlines:
        met = sum(1 for q in qs if q.met and q.failed is None)
    else:
        met = sum(1 for q in qs if q.failed is None and q.latency <= scale * q.standalone_s + EPS)
    return met / len(qs)


def slo_curve(runs: Mapping[float, SimResult], use_deadlines: bool) -> list[dict[str, float]]:
    return [{"scale": s, "attainment": attainment(r, s, use_deadlines)}
            for s, r in sorted(runs.items())]


def min_slo_scale(curve: Sequence[Mapping[str, float]], target: float) -> float | None:
    """Smallest scale reaching `target` attainment; linear between grid points."""
    prev = None
    for point in curve:
        s, a = point["scale"], point["attainment"]
        if a >= target - EPS:
            if prev is None or prev[1] >= a:
                return s
            ps, pa = prev
            return ps + (target - pa) * (s - ps) / (a - pa)
        prev = (s, a)
    return None


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    arr = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"mean": float(arr.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def summarize(result: SimResult) -> dict[str, Any]:
    """Latency, throughput, call-level and instance-level figures of one run."""
    done = [q for q in result.queries if q.failed is None]
    lat = [q.latency for q in done]
    if done:
        span = max(q.finish for q in done) - min(q.arrival for q in result.queries)
        throughput = len(done) / span if span > 0 else float("nan")
    else:
        throughput = 0.0
    calls = result.calls
    prompt = sum(c.input_tokens for c in calls)
    cached = sum(c.cached_tokens for c in calls)
    queueing = [(c.started if c.started is not None else c.released) - c.enqueued for c in calls]
    ttft = [c.first_token - c.enqueued for c in calls if c.first_token is not None]
    tpot = [(c.finished - c.first_token) / (c.output_tokens - 1)
            for c in calls if c.first_token is not None and c.output_tokens > 1]
    makespan = max(result.makespan, EPS)
    return {
        "queries": len(result.queries),
        "completed": len(done),
        "failed": len(result.queries) - len(done),
        "failure_reasons": failure_reasons(result),
        "throughput_qps": throughput,
        "latency_s": percentiles(lat),
        "token_hit_rate": cached / prompt if prompt else 0.0,
        "calls": len(calls),
        "call_queueing_s": percentiles(queueing),
        "call_ttft_s": percentiles(ttft),
        "call_tpot_s": percentiles(tpot),
        "preemptions": sum(i.preemptions for i in result.instances),
        "adapter_loads": sum(i.adapter_loads for i in result.instances),
        "instances": [
            {"name": i.name, "gpu": i.gpu, "utilization": i.busy_s / makespan,
             "calls": i.completed, "prefilled_tokens": i.prefilled_tokens,
             "cached_tokens": i.cached_tokens, "preemptions": i.preemptions}
            for i in result.instances
        ],
        "sim_wall_s": result.sim_wall_s,
        "sim_events": result.events,
        # requests with TTFT/TPOT objectives: the share meeting both (None without any)
        "latency_slo": latency_slo_attainment(result) if any(q.slo for q in result.queries) else None,
    }


def latency_slo_attainment(result: SimResult) -> dict[str, Any]:
    """Of the queries with TTFT/TPOT objectives (`Query.slo`), the share meeting both: every
    LLM call of the query met its TTFT (first token − ready) and its TPOT ((end − first
    token) / (output tokens − 1)), and the query completed. A query shed (refused early)
    or failed meets nothing; `shed` counts the shed ones."""
    with_slo = {q.id: q for q in result.queries if q.slo is not None}
    missed: set[int] = set()
    for c in result.calls:
        q = with_slo.get(c.query_id)
        if q is None or c.query_id in missed:
            continue
        ttft = None if c.first_token is None else c.first_token - c.ready
        tpot = (c.finished - c.first_token) / (c.output_tokens - 1) if c.first_token is not None and \
            c.output_tokens > 1 else None
        if not q.slo.met(ttft, tpot):  # type: ignore[union-attr]
            missed.add(c.query_id)
    met = [q for q in with_slo.values() if q.failed is None and q.id not in missed]
    shed = sum(1 for q in with_slo.values() if q.failure is FailureKind.SHED)
    n = len(with_slo)
    return {"requests": n, "met": len(met), "share_met": len(met) / n if n else None, "shed": shed,
            "shed_share": shed / n if n else None}


def stage_distribution(result: SimResult, group: Mapping[str, str] | None = None
                       ) -> dict[str, dict[str, float]]:
    """Share of each stage's calls served by each instance (Hexgen Table 1)."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in result.calls:
        stage = group.get(c.stage, c.stage) if group else c.stage
        counts[stage][c.instance] += 1
    names = [i.name for i in result.instances]
    out = {}
    for stage, per in counts.items():
        total = sum(per.values())
        out[stage] = {n: per.get(n, 0) / total for n in names}
    return out


def failure_reasons(result: SimResult) -> dict[str, int]:
    """Failed queries counted by reason (numbers elided, so one cause is one line)."""
    counts: dict[str, int] = defaultdict(int)
    for q in result.queries:
        if q.failed is not None:
            counts[re.sub(r"\d+", "N", q.failed)] += 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
