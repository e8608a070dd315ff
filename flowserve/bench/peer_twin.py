"""The simulated twin of `bench live --peer sglang-router`: the same requests, the same
arrival times, the engines' fitted profile (llama-server's slot caches included), each
router as the simulator knows it.

* flowserve: its `flowserve` dispatch and queue, `max_inflight` = the engine's slots, the
  router's view of the engines' caches estimated as the gateway keeps it for llama-server
  (`cache_view="estimated"`: an LRU model of at most one cached prompt per slot);
* sglang-router: its `cache_aware` policy (`sglang_cache_aware`, its own approximate
  radix tree), every request sent at once (the router holds nothing back: llama-server
  queues what its slots cannot take).

The twin predicts twice: with the engines at their profile's speed (a prediction made
before the run), and at the speed the engines themselves reported for this run (their
`/metrics` prompt seconds per computed token, `engine_speed`). On a shared machine the same
prefill takes 1.0–1.8 s from one minute to the next, and a bench that runs near the
engines' capacity turns such swings into large latency differences; the second figure
separates what the simulator gets wrong about routing, queues and slot caches from how fast
the host happened to be. Either way the twin's router believes the profile, as the live one
does.

The prompts are tokenized with the tiny model's own tokenizer and cut into what they share
(the document, up to where its requests diverge) and what is theirs, so the simulated
slot caches see the same reuse the live ones do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from flowserve.calibrate.validate import engine_instance
from flowserve.core.records import CallRecord
from flowserve.engines.scaled_cost import ScaledCost
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.profiles.cost_model import CostModel
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import SimResult
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

WORKFLOW, STAGE = "chat", "answer"

# the router → how the simulator runs it: (policy pair, the engine's slots gate the router)
TWINS: Mapping[str, tuple[PolicySpec, bool]] = {
    "flowserve": (PolicySpec("flowserve", "flowserve"), True),
    "sglang-router": (PolicySpec("sglang_cache_aware", "fcfs"), False),
}


def engine_speed(live_prompt_s: float, live_prompt_tokens: float, calls: Sequence[CallRecord],
                 cost: CostModel) -> float:
    """How much slower the live engines computed prompts than their profile: the seconds per
    computed prompt token they reported (llama-server's `prompt_seconds_total` over
    `prompt_tokens_total`) over the profile's for the twin's calls (Σ prefill time of their
    uncached tokens after their cached ones, over Σ uncached tokens). 1 when either is unknown."""
    uncached = sum(c.input_tokens - c.cached_tokens for c in calls)
    profiled = sum(cost.prefill_time(c.input_tokens - c.cached_tokens, c.cached_tokens) for c in calls
                   if c.input_tokens > c.cached_tokens)
    if live_prompt_tokens <= 0 or live_prompt_s <= 0 or uncached <= 0 or profiled <= 0:
        return 1.0
    return (live_prompt_s / live_prompt_tokens) / (profiled / uncached)


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def tokenize(texts: Sequence[str], tokenizer: Path) -> list[list[int]]:
    """The prompts' token ids, as the tiny model's own tokenizer (`tokenizer.json`) gives them."""
    tok = Tokenizer.from_file(str(tokenizer))
    return [tok.encode(t).ids for t in texts]


def twin_workload(ids: Sequence[Sequence[int]], times: Sequence[float], docs: Sequence[int],
                  output_tokens: int) -> Workload:
    """Single-call queries: each prompt's tokens as a segment its document's requests share
    (their common token prefix) and a unique remainder; `docs[i]` names request i's document."""
    shared: dict[int, int] = {}  # document → tokens every request of it shares
    first: dict[int, Sequence[int]] = {}
    for doc, toks in zip(docs, ids, strict=True):
        if doc not in first:
            first[doc], shared[doc] = toks, len(toks)
        else:
            shared[doc] = min(shared[doc], common_prefix_len(first[doc], toks))
    segs = SegmentIds()
    specs = []
    for i, (doc, toks, t) in enumerate(zip(docs, ids, times, strict=True)):
        head = min(shared[doc], len(toks) - 1)
        prompt = (Segment(segs.shared(f"doc{doc}"), head), Segment(segs.unique(), len(toks) - head))
        specs.append(QuerySpec(i, float(t), QueryPlan(WORKFLOW, ((CallStep(STAGE, prompt, output_tokens),),))))
    return Workload("peer-live-twin", tuple(specs), {}, {(WORKFLOW, STAGE): float(output_tokens)})


def twin_cluster(profile: Path, slots: int, gated: bool, n: int = 2) -> list[InstanceSpec]:
    """The bench's engines as simulated instances: `slots` sequences each; `gated`: the
    router releases at most `slots` calls to an engine (flowserve's `max_inflight`)."""
    out = []
    for i in range(n):
        spec = engine_instance("http://127.0.0.1:1", profile, f"llama{i}")
        out.append(dataclasses.replace(spec, backend="sim", url=None,
                                       engine=dataclasses.replace(spec.engine, max_num_seqs=slots),
                                       max_inflight=slots if gated else None))
    return out


def simulate_twin(router: str, workload: Workload, profile: Path, slots: int, live: Mapping[str, float] | None = None,
                  queue_params: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Mean and p99 latency and the engines' token hit rate the simulator predicts at the
    profile's speed (`sim_*`); with the `live` run's engine counters (`prompt_seconds`,
    `computed_tokens`), also at the speed the engines reported (`sim_at_speed_*`, and the
    factor as `engine_speed`)."""
    policy, gated = TWINS[router]
    if queue_params:
        policy = dataclasses.replace(policy, queue_params=dict(queue_params))
    cluster = twin_cluster(profile, slots, gated)

    def run(factor: float) -> SimResult:
        engines = {s.name: ScaledCost(s.profile, factor) for s in cluster if s.profile is not None}
        return simulate(cluster, workload, policy, cache_view="estimated", engine_costs=engines)

    res = run(1.0)
    out = summary(res, "sim")
    if live is not None and cluster[0].profile is not None:
        factor = engine_speed(live["prompt_seconds"], live["computed_tokens"], res.calls, cluster[0].profile)
        out.update(summary(run(factor), "sim_at_speed"), engine_speed=factor)
    return out


def summary(res: SimResult, prefix: str) -> dict[str, float]:
    lat = np.asarray([q.latency for q in res.queries if q.failed is None] or [np.nan])
    prompt = sum(c.input_tokens for c in res.calls)
    cached = sum(c.cached_tokens for c in res.calls)
    return {f"{prefix}_mean_s": float(lat.mean()), f"{prefix}_p99_s": float(np.percentile(lat, 99)),
            f"{prefix}_hit_rate": cached / prompt if prompt else 0.0}
