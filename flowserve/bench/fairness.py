"""`flowserve bench fairness`: two tenants with weights 3:1 under a flood, in both drivers.

The light tenant (`gold`, weight 3) sends text2sql queries at its normal rate (the
`two-tenants` mix's 0.3 q/s); the heavy one (`free`, weight 1) floods at 3× the
cluster's capacity (measured: the completion rate of a saturating burst). Figures:

* the light tenant's mean latency with the flood over its mean latency alone (goal ≤ 1.25);
* each tenant's share of the engine tokens (uncached prompt + output) while both flood
  at 3× capacity, against the 3:1 weights (goal: within 10% of 0.75 / 0.25), counted over
  the calls that finish within the arrival window (after it, one tenant's backlog drains
  alone and the shares follow the demand, not the weights).

Each scenario runs in the simulator and live — the gateway's driver (asyncio, real time)
on simulated engines `time_scale` times faster than the modelled GPUs — with the same
workload, side by side. Arms: `flowserve` (the defaults: tenants within their share of the
sweet spot go first, and beside their deadline-free calls a flooder is held to the stricter
spot with its prefills spaced: `isolate`), without the isolation, and with neither the
isolation nor the sweet-spot gate (`gain` 0), so each mechanism's part is measured; live,
the defaults.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.config import load_cluster
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import load_workload
from flowserve.workloads.base import Workload
from flowserve.workloads.mixes import mix, tag

CLUSTER = "hetero-1"
WEIGHTS = "gold:3,free:1"
LIGHT_RATE = 0.3  # the light tenant's normal rate (the `two-tenants` mix's)
FLOOD = 3.0  # the heavy tenant's rate, in multiples of the cluster's capacity
ARMS: dict[str, dict[str, Any]] = {"flowserve": {}, "flowserve, no isolation": {"isolate": False},
                                   "flowserve, no gate": {"gain": 0.0, "isolate": False}}
LIVE_ARMS = ("flowserve",)  # the defaults, live (each live arm replays every scenario in real time)
GOAL_RATIO = 1.25
GOAL_SHARE = 0.10


def text2sql(rate: float, queries: int, seed: int) -> Workload:
    return load_workload("text2sql-mixed", {"rate": rate, "queries": max(1, queries), "seed": seed})


def capacity_qps(cluster: Sequence[InstanceSpec], queries: int, seed: int) -> float:
    """Queries per second the cluster completes under a saturating burst (all queries
    arriving within a few seconds) with the flowserve policy."""
    burst = text2sql(100.0, queries, seed + 7)
    res = simulate(cluster, burst, policy("flowserve"), record_calls=False)
    return len(res.queries) / max(res.makespan, 1e-9)


def policy(arm: str) -> PolicySpec:
    return PolicySpec("flowserve", "flowserve", queue_params={"tenant_weights": WEIGHTS, **ARMS[arm]})


def scenarios(light: int, cap: float, seed: int) -> dict[str, Workload]:
    """`alone`: the light tenant; `flood`: it and the heavy one at FLOOD × capacity over the
    same window; `both`: both tenants at FLOOD × capacity."""
    gold = tag(text2sql(LIGHT_RATE, light, seed), 0, "gold")
    window = max(q.arrival for q in gold.queries)
    flood = tag(text2sql(FLOOD * cap, round(FLOOD * cap * window), seed + 1), 1, "free")
    both_gold = tag(text2sql(FLOOD * cap, round(FLOOD * cap * window), seed + 2), 0, "gold")
    return {"alone": mix("alone", [gold]), "flood": mix("flood", [gold, flood]),
            "both": mix("both", [both_gold, flood])}


def summary(wl: Workload, latencies: Mapping[int, float], calls: Iterable[tuple[int, float, int]],
            window: float) -> dict[str, Any]:
    """Per tenant: mean latency of its queries; token shares of the calls (query id, finish
    time, engine tokens) that finished within the arrival window."""
    tenant = {q.id: q.tenant for q in wl.queries}
    lat: dict[str, list[float]] = defaultdict(list)
    for qid, latency in latencies.items():
        lat[tenant[qid]].append(latency)
    tokens: dict[str, float] = defaultdict(float)
    for qid, finished, n in calls:
        if finished <= window:
            tokens[tenant[qid]] += n
    total = sum(tokens.values()) or 1.0
    return {"mean_latency_s": {t: float(np.mean(v)) for t, v in sorted(lat.items())},
            "queries": {t: len(v) for t, v in sorted(lat.items())},
            "token_share": {t: v / total for t, v in sorted(tokens.items())}}


def run_sim(cluster: Sequence[InstanceSpec], wl: Workload, arm: str) -> dict[str, Any]:
    res = simulate(cluster, wl, policy(arm))
    window = max(q.arrival for q in wl.queries)
    return summary(wl, {q.id: q.latency for q in res.queries if q.failed is None},
                   ((c.query_id, c.finished, c.input_tokens - c.cached_tokens + c.output_tokens) for c in res.calls),
                   window)


def run_live(cluster: Sequence[InstanceSpec], wl: Workload, arm: str, time_scale: float) -> dict[str, Any]:
    """The gateway's driver on simulated engines `time_scale` times faster, in real time;
    latencies and windows reported in the engines' (simulated) seconds."""
    from flowserve.calibrate.replay import replay_live
    from flowserve.host.root import compose_driver
    from flowserve.host.settings import GatewaySettings

    p = policy(arm)
    settings = GatewaySettings(dispatch="flowserve", queue="flowserve", queue_params=dict(p.queue_params),
                               time_scale=time_scale)
    fast = dataclasses.replace(wl, queries=tuple(dataclasses.replace(q, arrival=q.arrival / time_scale)
                                                 for q in wl.queries))

    async def go() -> list[Any]:
        driver = compose_driver(cluster, settings, output_priors=dict(wl.output_priors))
        await driver.start()
        try:
            return await replay_live(driver, fast)
        finally:
            await driver.shutdown()

    t0 = time.perf_counter()
    outcomes = asyncio.run(go())
    wall = time.perf_counter() - t0
    lat = {o.query_id: o.latency_s * time_scale for o in outcomes if o.latency_s is not None}
    arrival = {q.id: q.arrival for q in fast.queries}
    done = [o for o in outcomes if o.result is not None and o.result.calls]
    # the driver's clock when the replay began: a query's first call is ready at its arrival
    t0 = min(min(c.ready for c in o.result.calls if c.ready is not None) - arrival[o.query_id] for o in done)
    calls = [(o.query_id, (c.finished - t0) * time_scale, c.prompt_tokens - c.cached_tokens + c.output_tokens)
             for o in done for c in o.result.calls]
    out = summary(wl, lat, calls, max(q.arrival for q in wl.queries))
    out["failed"] = sum(1 for o in outcomes if o.latency_s is None)
    out["wall_s"] = wall
    return out


def goals(res: Mapping[str, Any]) -> dict[str, Any]:
    alone = res["alone"]["mean_latency_s"]["gold"]
    flooded = res["flood"]["mean_latency_s"]["gold"]
    share = res["both"]["token_share"].get("gold", 0.0)
    return {"light_latency_ratio": flooded / alone, "light_within_1.25x": flooded / alone <= GOAL_RATIO,
            "gold_share": share, "shares_within_10pct": abs(share / 0.75 - 1.0) <= GOAL_SHARE}


def run_fairness_bench(out: Path, console: Console, light: int = 40, seed: int = 0, live: bool = True,
                       time_scale: float = 4.0, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    cluster = load_cluster(CLUSTER)
    cap = capacity_qps(cluster, 120, seed)
    wls = scenarios(light, cap, seed)
    live_cluster = tuple(dataclasses.replace(s, reports_capacity=True) for s in cluster)
    data: dict[str, Any] = {"bench": "fairness", "cluster": CLUSTER, "weights": WEIGHTS, "capacity_qps": cap,
                            "light_rate": LIGHT_RATE, "flood_rate": FLOOD * cap, "time_scale": time_scale,
                            "queries": {k: len(w.queries) for k, w in wls.items()}, "runs": {}}
    rows = []
    for driver in ("sim", "live") if live else ("sim",):
        for arm in ARMS if driver == "sim" else LIVE_ARMS:
            res = {}
            for name, wl in wls.items():
                if say:
                    say(f"{driver}: {arm}, {name} ({len(wl.queries)} queries)")
                res[name] = run_sim(cluster, wl, arm) if driver == "sim" else \
                    run_live(live_cluster, wl, arm, time_scale)
            res["goals"] = goals(res)
            data["runs"][f"{driver}: {arm}"] = res
            g = res["goals"]
            rows.append([driver, arm, res["alone"]["mean_latency_s"]["gold"], res["flood"]["mean_latency_s"]["gold"],
                         g["light_latency_ratio"], res["flood"]["mean_latency_s"].get("free"), g["gold_share"],
                         res["both"]["token_share"].get("free", 0.0)])
    console.print(f"capacity {cap:.2f} q/s; gold at {LIGHT_RATE} q/s, free floods at {FLOOD * cap:.2f} q/s; "
                  f"weights {WEIGHTS}", highlight=False)
    console.print(markdown_table(["driver", "arm", "gold alone s", "gold in flood s", "ratio (≤ 1.25)",
                                  "free in flood s", "gold share (0.75)", "free share (0.25)"], rows), highlight=False)
    path = write_json(out / "bench-fairness.json", data)
    console.print(f"json: {path}")
    return data
