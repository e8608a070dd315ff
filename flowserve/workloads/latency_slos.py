"""Per-request TTFT/TPOT objectives on any workload: each query draws one of several SLO
classes (what a gateway sees as `x-slo-ttft-ms`, `x-slo-tpot-ms` and `x-priority` on
each request), seeded, so every policy meets the same requests with the same objectives.

YAML (`kind: slo`): `base` is any workload (a built-in name, a file, or a mapping), and
`classes` the objectives with their shares, e.g.

    kind: slo
    base: {kind: tool_use, rate: 6, queries: 400}
    classes:
      - {share: 0.5, ttft_ms: 1000, tpot_ms: 40}                 # interactive
      - {share: 0.5, ttft_ms: 4000, tpot_ms: 150, priority: -1}  # relaxed, sheddable
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.types.work import LatencySLO
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.preble import lognormal

CHAT, CHAT_STAGE = "chat", "answer"


def chat_workload(queries: int, rate: float, seed: int, systems: int = 16) -> Workload:
    """Single-call chat requests: one of `systems` shared system prompts (log-normal, 800 ± 400
    tokens; Zipf-popular), a unique user turn (300 ± 200), an answer of 150 ± 100 tokens;
    Poisson arrivals at `rate`/s."""
    rng = np.random.default_rng(seed)
    ids = SegmentIds()
    lengths = [lognormal(rng, 800, 400, low=50) for _ in range(systems)]
    weights = 1.0 / np.arange(1, systems + 1)
    weights /= weights.sum()
    specs = []
    for i, t in enumerate(arrival_times(rng, queries, rate)):
        k = int(rng.choice(systems, p=weights))
        user = Segment(ids.unique(), lognormal(rng, 300, 200, low=10))
        prompt = (Segment(ids.shared(f"system{k}"), lengths[k]), user)
        plan = QueryPlan(CHAT, ((CallStep(CHAT_STAGE, prompt, lognormal(rng, 150, 100, low=2, high=1024)),),))
        specs.append(QuerySpec(i, float(t), plan))
    return Workload("chat", tuple(specs), {}, {(CHAT, CHAT_STAGE): 150.0})


@dataclass(frozen=True, slots=True)
class SLOClass:
    """A share of the requests with these objectives and this priority (negative: sheddable)."""

    share: float
    slo: LatencySLO
    priority: int = 0


def with_latency_slos(workload: Workload, classes: Sequence[SLOClass], seed: int) -> Workload:
    """The workload with each query's class drawn by `seed` in proportion to the shares."""
    if not classes:
        raise ValueError("with_latency_slos: no SLO classes")
    shares = np.asarray([c.share for c in classes], dtype=float)
    if (shares < 0).any() or shares.sum() <= 0:
        raise ValueError(f"with_latency_slos: shares must be ≥ 0 and not all 0, got {shares.tolist()}")
    picks = np.random.default_rng(seed).choice(len(classes), size=len(workload.queries), p=shares / shares.sum())
    queries = tuple(replace(q, slo=classes[k].slo, priority=classes[k].priority)
                    for q, k in zip(workload.queries, picks.tolist(), strict=True))
    return replace(workload, name=f"{workload.name}+slo", queries=queries)
