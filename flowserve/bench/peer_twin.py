"""The simulated twin of `bench live --peer sglang-router`: the same requests, the same
arrival times, the engines' fitted profile (llama-server's slot caches included), each
router as the simulator knows it.

* flowserve: its `flowserve` dispatch and queue, `max_inflight` = the engine's slots, the
  router's view of the engines' caches estimated as the gateway keeps it for llama-server
  (`cache_view="estimated"`: an LRU model of at most one cached prompt per slot);
* sglang-router: its `cache_aware` policy (`sglang_cache_aware`, its own approximate
  radix tree), every request sent at once (the router holds nothing back: llama-server
  queues what its slots cannot take).

The bench profiles one engine alone, while in the bench two engines, the router and the
client share the host's cores: the twin's engines run as much slower as one measured
request with both engines busy takes over alone (`engine_contention`), and the twin's
router believes the profile, as the live router does.

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
from flowserve.engines.scaled_cost import ScaledCost
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

WORKFLOW, STAGE = "chat", "answer"

# the router → how the simulator runs it: (policy pair, the engine's slots gate the router)
TWINS: Mapping[str, tuple[PolicySpec, bool]] = {
    "flowserve": (PolicySpec("flowserve", "flowserve"), True),
    "sglang-router": (PolicySpec("sglang_cache_aware", "fcfs"), False),
}


def engine_contention(alone_s: Sequence[float], together_s: Sequence[float]) -> float:
    """How much slower an engine serves while its sibling on the same host works too: the
    mean time of the same kind of request with both engines busy over alone (≥ 1: sharing
    cores, caches and memory bandwidth never speeds a CPU engine up)."""
    return max(1.0, float(np.mean(together_s)) / float(np.mean(alone_s)))


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


def simulate_twin(router: str, workload: Workload, profile: Path, slots: int, contention: float = 1.0,
                  queue_params: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Mean and p99 latency and the engines' token hit rate the simulator predicts. The
    engines run `contention` times slower than their profile (they share the host's cores:
    `engine_contention`), while the router believes the profile, as the live one does."""
    policy, gated = TWINS[router]
    if queue_params:
        policy = dataclasses.replace(policy, queue_params=dict(queue_params))
    cluster = twin_cluster(profile, slots, gated)
    engines = {s.name: ScaledCost(s.profile, contention) for s in cluster if s.profile is not None}
    res = simulate(cluster, workload, policy, cache_view="estimated", engine_costs=engines)
    lat = np.asarray([q.latency for q in res.queries if q.failed is None] or [np.nan])
    prompt = sum(c.input_tokens for c in res.calls)
    cached = sum(c.cached_tokens for c in res.calls)
    return {"sim_mean_s": float(lat.mean()), "sim_p99_s": float(np.percentile(lat, 99)),
            "sim_hit_rate": cached / prompt if prompt else 0.0}
