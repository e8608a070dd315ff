"""`flowserve validate`: the same workload on a real engine and in the simulator.

The engine is one instance described by its fitted profile (`flowserve profile`). The
workload is replayed through the live driver against the engine (`replay_live`: real
token ids with the workload's sharing structure, exact output lengths, real arrival
times) and simulated with the profile as the cost model, under the same dispatch and
queue policies. Reported: per-query latency error |sim − live| / live (mean, p50, p90,
max, in %), mean latencies, and the token hit rate of each (prompt tokens the engine
reported cached / all prompt tokens) and their difference in points.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.calibrate.replay import hit_rate, replay_live
from flowserve.config import InstanceConfig
from flowserve.engines.client import EngineClient
from flowserve.errors import ConfigError
from flowserve.graph.plan import Segment
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.fitted import FittedCostModel
from flowserve.schema import validate
from flowserve.sim.run import PolicySpec, simulate
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload


def engine_instance(url: str, profile: str | Path, name: str = "engine") -> InstanceSpec:
    (spec,) = validate(InstanceConfig, {"name": name, "profile": str(profile), "backend": "openai", "url": url},
                       "validate").specs()
    return spec


async def vocab_size_of(url: str) -> int:
    """llama-server reports `meta.n_vocab` in `/v1/models`; others need --vocab-size."""
    async with EngineClient(url) as c:
        data = await c.get_json("/v1/models")
    for m in data.get("data") or ():
        n = (m.get("meta") or {}).get("n_vocab")
        if n:
            return int(n)
    raise ConfigError(f"{url} does not report its vocabulary size; pass --vocab-size")


async def warm_up(url: str, vocab: int, salt: int, tokens: int) -> None:
    """Two requests as long as the workload's longest prompt first: an engine's first
    large batches pay one-off costs (buffer allocation) the profile does not model. Their
    tokens share nothing with the workload's."""
    mat = TokenMaterializer(vocab, salt + 1_000_003)
    async with EngineClient(url) as c:
        for k in (1, 2):
            await c.complete(list(mat.segment(Segment(k, max(tokens, 16)))), 4, ignore_eos=True)


def pct_errors(live: dict[int, float], sim: dict[int, float]) -> list[float]:
    """|sim − live| / live × 100 for every query both completed."""
    return [abs(sim[q] - t) / t * 100.0 for q, t in sorted(live.items()) if q in sim and t > 0]


def summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p90": None, "max": None}
    arr = np.asarray(values)
    return {"mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)),
            "p90": float(np.percentile(arr, 90)), "max": float(arr.max())}


def sim_errors(spec: InstanceSpec, workload: Workload, policy: PolicySpec, live_lat: dict[int, float],
               profile: FittedCostModel | None = None) -> tuple[list[float], dict[int, float], float]:
    """The workload simulated on the instance (with `profile` instead of its own): per-query
    % errors against `live_lat`, simulated latencies and the simulated token hit rate."""
    sim_spec = dataclasses.replace(spec, backend="sim", url=None, reports_capacity=True,
                                   profile=profile or spec.profile)
    sim = simulate([sim_spec], workload, policy)
    sim_lat = {q.id: q.latency for q in sim.queries if q.failed is None}
    sim_prompt = sum(c.input_tokens for c in sim.calls)
    sim_hit = sum(c.cached_tokens for c in sim.calls) / sim_prompt if sim_prompt else 0.0
    return pct_errors(live_lat, sim_lat), sim_lat, sim_hit  # type: ignore[arg-type]


async def validate_engine(url: str, profile: str | Path, workload: Workload, policy: PolicySpec,
                          salt: int = 0, vocab_size: int | None = None,
                          variants: Mapping[str, FittedCostModel] | None = None) -> dict[str, Any]:
    """`variants`: other profiles of the same engine (an ablation) simulated against the
    same live run; each gets its error summary under `ablation`."""
    spec = engine_instance(url, profile)
    load_before = os.getloadavg()
    vocab = vocab_size or await vocab_size_of(url)
    longest = max(c.input_tokens for q in workload.queries for c in q.plan.calls())
    await warm_up(url, vocab, salt, min(longest, spec.profile.max_context - 8 if spec.profile else longest))
    settings = GatewaySettings(dispatch=policy.dispatch, queue=policy.queue,
                               dispatch_params=dict(policy.dispatch_params), queue_params=dict(policy.queue_params))
    driver = compose_driver([spec], settings, output_priors=dict(workload.output_priors),
                            segments=TokenMaterializer(vocab, salt))
    await driver.start()
    try:
        outcomes = await replay_live(driver, workload)
    finally:
        await driver.shutdown()
    load_after = os.getloadavg()
    live_lat: dict[int, float] = {o.query_id: o.latency_s for o in outcomes if o.latency_s is not None}
    errors, sim_lat, sim_hit = sim_errors(spec, workload, policy, live_lat)
    live_hit = hit_rate(outcomes)
    ablation = {}
    for name, variant in (variants or {}).items():
        errs, lat, hit = sim_errors(dataclasses.replace(spec, profile=variant), workload, policy, live_lat)
        ablation[name] = {"latency_error_pct": summary(errs), "sim_mean_latency_s": float(np.mean(list(lat.values()))),
                          "sim_token_hit_rate": hit}
    failed = [{"query": o.query_id, "reason": o.rejected or (o.result.reason if o.result else None)}
              for o in outcomes if o.latency_s is None]
    return {
        "engine": url, "profile": str(profile), "model": spec.model, "workload": workload.name,
        "policy": {"dispatch": policy.dispatch, "queue": policy.queue},
        "queries": len(workload.queries), "compared": len(errors), "failed_live": failed,
        "latency_error_pct": summary(errors),
        "mean_latency_s": {"live": float(np.mean(list(live_lat.values()))) if live_lat else None,
                           "sim": float(np.mean(list(sim_lat.values()))) if sim_lat else None},
        "token_hit_rate": {"live": live_hit, "sim": sim_hit, "diff_points": 100.0 * (sim_hit - live_hit)},
        "per_query": [{"query": q, "live_s": t, "sim_s": sim_lat.get(q)} for q, t in sorted(live_lat.items())],
        "goal_mean_abs_pct": 10.0,
        "load_average_1m": {"before": load_before[0], "after": load_after[0]},
        "ablation": ablation,
    }
