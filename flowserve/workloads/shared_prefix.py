"""Workloads sized for live benchmarks on small CPU engines (written as JSONL traces so
`flowserve validate --workload` and the simulator replay them exactly)."""

from __future__ import annotations

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

WORKFLOW, STAGE = "chat", "answer"


def shared_prefix_workload(queries: int, rate: float, prefixes: int, prefix_tokens: int, suffix_tokens: int,
                           output_tokens: int, seed: int = 0, unique_share: float = 0.0) -> Workload:
    """Single-call queries: a long prefix drawn uniformly from `prefixes` shared ones (a
    document, a tool manual, a schema) plus a short unique question; a `unique_share` of
    the queries instead has a prompt shared with nobody. Poisson arrivals at `rate`/s."""
    if min(queries, prefixes, prefix_tokens, suffix_tokens, output_tokens) < 1 or not 0 <= unique_share <= 1:
        raise ConfigError("shared-prefix workload: sizes must be positive and unique_share in [0, 1]")
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, queries, rate)
    ids = SegmentIds()
    specs = []
    for i, t in enumerate(times):
        if rng.random() < unique_share:
            prompt: tuple[Segment, ...] = (Segment(ids.unique(), prefix_tokens + suffix_tokens),)
        else:
            k = int(rng.integers(prefixes))
            prompt = (Segment(ids.shared(f"prefix{k}"), prefix_tokens), Segment(ids.unique(), suffix_tokens))
        plan = QueryPlan(WORKFLOW, ((CallStep(STAGE, prompt, output_tokens),),))
        specs.append(QuerySpec(i, float(t), plan))
    return Workload("shared-prefix", tuple(specs), {}, {(WORKFLOW, STAGE): float(output_tokens)})
