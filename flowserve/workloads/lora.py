"""Requests to many LoRA adapters of one base model, the adapters' popularity Zipf-skewed
(S-LoRA's and Punica's evaluation shape: a few adapters carry most requests, a long tail
the rest).

Each adapter is an application of its own: its requests share its system prompt (drawn
once per adapter, log-normal), then a question of their own, and name the adapter as
their model (`lora-0`, `lora-1`, ...; `base_share` of them name no adapter: the base
model). One call per query. Serve it on instances listing the adapters
(`lora_adapters:`; the built-in cluster `lora-a100` lists `lora-0` to `lora-31`).
"""

from __future__ import annotations

import numpy as np

from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.preble import lognormal

WORKFLOW = "lora_chat"


def zipf_weights(n: int, s: float) -> np.ndarray:
    """P(rank k) ∝ 1 / k^s, k = 1..n."""
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def lora_workload(queries: int, rate: float, seed: int = 0, adapters: int = 32, zipf: float = 1.0,
                  prefix: str = "lora-", base_share: float = 0.0, system_tokens: int = 100,
                  question_tokens: int = 200, output_tokens: int = 120, arrival: str = "poisson",
                  cv: float | None = None) -> Workload:
    rng = np.random.default_rng(seed)
    ids = SegmentIds()
    systems = [Segment(ids.shared(f"lora/{k}"), lognormal(rng, system_tokens, system_tokens / 2, low=16))
               for k in range(adapters)]
    picks = rng.choice(adapters, size=queries, p=zipf_weights(adapters, zipf))
    base = rng.random(queries) < base_share
    times = arrival_times(rng, queries, rate, arrival, cv)
    specs = []
    for i, (k, t) in enumerate(zip(picks, times, strict=True)):
        question = Segment(ids.unique(), lognormal(rng, question_tokens, question_tokens / 2, low=8))
        out = lognormal(rng, output_tokens, output_tokens * 0.8, low=4)
        model = None if base[i] else f"{prefix}{k}"
        plan = QueryPlan(WORKFLOW, ((CallStep("answer", (systems[k], question), out),),),
                         {"adapter": model or "base"})
        specs.append(QuerySpec(i, float(t), plan, model=model))
    return Workload(f"lora({adapters} adapters, zipf {zipf:g})", tuple(specs))
