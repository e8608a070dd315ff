"""`flowserve bench replicas`: N gateways sharing one Redis against one process, in the
simulator and live (simulated engines behind HTTP, a real redis-server, `flowserve
serve` processes, a client that spreads requests round-robin over the replicas).

Parts (`--parts`): `sim` (1, 2, 4 replicas and the same without sync, predicted), `scale`
(1, 2, 4 replicas live at the same offered load: hit rate, mean latency, every program
summary exact), `flood` (two tenants flooding two replicas: service shares against the
weights 2:1), `kill` (SIGKILL one of two replicas mid-run), `outage` (Redis stopped
`outage_s` mid-run), `cost` (one replica with a state URL against one without, wrk on an
instant engine). Live parts record the load average they ran under (`os.getloadavg`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.bench.replicas_client import ClientRun, run_client
from flowserve.bench.replicas_cost import sharing_cost
from flowserve.bench.replicas_fleet import GPUS, LLM, TP, FleetReplica, redis, replicas, serve_yaml, sim_engines
from flowserve.bench.replicas_workload import WEIGHTS, replicas_workload
from flowserve.errors import ConfigError
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.replicas.redis_server import PrivateRedis
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec

PARTS = ("sim", "scale", "flood", "kill", "outage", "cost")
POLICY = {"dispatch": "flowserve", "queue": "flowserve", "queue_params": {"tenant_weights": WEIGHTS}}
SYNC_MS = 20.0
FLOOD = 4  # the flood's offered load, × the bench's rate


def cost_share(calls: Sequence[Any]) -> dict[str, float]:
    """Each tenant's share of the served VTC cost (uncached prompt + 2 × output tokens)."""
    cost: Counter[str] = Counter()
    for c in calls:
        cost[c.tenant] += max(c.prompt - c.cached, 1) + 2 * c.output
    total = sum(cost.values()) or 1
    return {t: v / total for t, v in sorted(cost.items())}


def measure(run: ClientRun, time_scale: float, backlogged: bool = False) -> dict[str, Any]:
    """A live run's figures; `backlogged`: tenants' service only while every tenant still
    had calls to serve (until the first tenant's last answer: a flood's shares)."""
    ok = [c for c in run.calls if c.status == 200]
    served = ok
    if backlogged and ok:
        end = min(max(c.done for c in ok if c.tenant == t) for t in {c.tenant for c in ok})
        served = [c for c in ok if c.done <= end]
    prompt = sum(c.prompt for c in ok)
    lat = [(c.done - c.sent) * time_scale for c in ok]
    bad = [p.mismatches() for p in run.programs]
    return {"calls": len(run.calls), "answered": len(ok), "status": dict(Counter(c.status for c in run.calls)),
            "server_errors": sum(1 for c in run.calls if c.status >= 500), "cut_in_flight":
            sum(1 for c in run.calls if c.status == 0), "rerouted": run.rerouted,
            "token_hit_rate": sum(c.cached for c in ok) / prompt if prompt else 0.0,
            "mean_latency_s": float(np.mean(lat)) if lat else None, "p90_latency_s":
            float(np.percentile(lat, 90)) if lat else None, "tenant_share": cost_share(served),
            "programs": len(run.programs), "programs_exact": sum(1 for b in bad if not b),
            "program_mismatches": [m for b in bad for m in b][:10], "wall_s": run.wall_s}


def sim_specs(gpus: tuple[str, ...] = GPUS) -> list[InstanceSpec]:
    """The live cluster as the simulator runs it (engines that do not report capacity)."""
    return [InstanceSpec(f"e{i}", g, LLM, TP) for i, g in enumerate(gpus)]


def predict(queries: int, rate: float, seed: int, replicas_n: int, sync_ms: float) -> dict[str, Any]:
    wl = replicas_workload(queries, rate, seed)
    policy = PolicySpec(POLICY["dispatch"], POLICY["queue"], {}, POLICY["queue_params"], None, replicas_n, sync_ms)
    r = simulate(sim_specs(), wl, policy, None)
    lat = [c.finished - c.ready for c in r.calls]
    prompt = sum(c.input_tokens for c in r.calls)
    return {"replicas": replicas_n, "sync_ms": sync_ms, "token_hit_rate": sum(c.cached_tokens for c in r.calls)
            / prompt, "mean_latency_s": float(np.mean(lat)), "calls": len(r.calls)}


def run_replicas_bench(out: Path, quick: bool, console: Console, parts: Sequence[str] = PARTS, seed: int = 0,
                       time_scale: float = 1.0, rate: float = 12.0, outage_s: float = 10.0) -> dict[str, Any]:
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ConfigError(f"--parts: no part {unknown}; parts: {', '.join(PARTS)}")
    out.mkdir(parents=True, exist_ok=True)
    queries = 240 if quick else 900
    sync_sim = SYNC_MS * time_scale  # the live sync period, in simulated milliseconds
    data: dict[str, Any] = {"bench": "replicas", "quick": quick, "seed": seed, "time_scale": time_scale,
                            "rate": rate, "queries": queries, "policy": POLICY, "sync_ms": SYNC_MS}

    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/]", highlight=False)

    if "sim" in parts:
        say("simulated: 1, 2 and 4 replicas, and 4 that never sync")
        data["sim"] = [predict(queries, rate, seed, n, sync_sim) for n in (1, 2, 4)]
        data["sim"].append({**predict(queries, rate, seed, 4, 1e9), "note": "no sync"})
    live = [p for p in parts if p != "sim"]
    if live:
        data["load_before"] = os.getloadavg()
        data["live"] = asyncio.run(_live(out, queries, rate, seed, time_scale, outage_s, live, say))
        data["load_after"] = os.getloadavg()
    report(data, console)
    write_json(out / "replicas.json", data)
    console.print(f"json: {out / 'replicas.json'}", highlight=False)
    return data


async def _live(out: Path, queries: int, rate: float, seed: int, scale: float, outage_s: float,
                parts: Sequence[str], say: Any) -> dict[str, Any]:
    """Each run on fresh engines (an empty cache) and an empty state."""
    res: dict[str, Any] = {}
    wl = replicas_workload(queries, rate, seed)
    duration = max(q.arrival for q in wl.queries)
    gateway = {**POLICY, "programs": {"idle_s": 600}}

    @contextlib.contextmanager
    def fleet(name: str, n: int, shared: bool = True) -> Iterator[tuple[list[FleetReplica], PrivateRedis]]:
        folder = out / name
        with sim_engines(folder, scale) as engines, redis(folder) as state, \
                replicas(folder, serve_yaml(folder, engines, gateway), n, state.url if shared else None) as reps:
            yield reps, state

    if "scale" in parts:
        res["scale"] = []
        for n in (1, 2, 4):
            say(f"live: {n} replica(s)")
            with fleet(f"scale{n}", n, shared=n > 1) as (reps, _):
                run = await run_client(wl, [r.url for r in reps], scale, seed=seed)
            res["scale"].append({"replicas": n, **measure(run, scale)})
    if "flood" in parts:
        flood = replicas_workload(2 * queries, rate * FLOOD, seed + 1)
        res["flood"] = []
        for n in (1, 2):
            say(f"live: two tenants flooding {n} replica(s)")
            with fleet(f"flood{n}", n, shared=n > 1) as (reps, _):
                run = await run_client(flood, [r.url for r in reps], scale, seed=seed)
            res["flood"].append({"replicas": n, "rate": rate * FLOOD, **measure(run, scale, backlogged=True)})
    if "kill" in parts:
        say("live: SIGKILL one of two replicas mid-run")
        with fleet("kill", 2) as (reps, _):
            async def kill() -> None:
                os.kill(reps[1].pid, signal.SIGKILL)

            run = await run_client(wl, [r.url for r in reps], scale, at=[(0.4 * duration, kill)], seed=seed)
        res["kill"] = measure(run, scale)
    if "outage" in parts:
        say(f"live: Redis stopped for {outage_s:g} s mid-run")
        with fleet("outage", 2) as (reps, state):
            async def stop() -> None:
                await asyncio.to_thread(state.stop)

            async def start() -> None:
                await asyncio.to_thread(state.start)

            t0 = 0.3 * duration
            run = await run_client(wl, [r.url for r in reps], scale, seed=seed,
                                   at=[(t0, stop), (t0 + outage_s * scale, start)])
        res["outage"] = {"outage_s": outage_s, **measure(run, scale)}
    if "cost" in parts:
        say("live: the cost of sharing (wrk, instant engine)")
        res["cost"] = sharing_cost(out / "cost")
    return res


def report(data: dict[str, Any], console: Console) -> None:
    sim = data.get("sim") or []
    live = (data.get("live") or {}).get("scale") or []
    rows = []
    base_s = sim[0] if sim else None
    base_l = live[0] if live else None
    for i, n in enumerate((1, 2, 4)):
        s = sim[i] if i < len(sim) else None
        lv = live[i] if i < len(live) else None
        rows.append([n, _pct(s and s["token_hit_rate"]), _pct(lv and lv["token_hit_rate"]),
                     _delta(s, base_s, "token_hit_rate"), _delta(lv, base_l, "token_hit_rate"),
                     _ratio(s, base_s), _ratio(lv, base_l),
                     "-" if lv is None else f"{lv['programs_exact']}/{lv['programs']}"])
    if len(sim) > 3:
        rows.append(["4, no sync", _pct(sim[3]["token_hit_rate"]), "-", _delta(sim[3], base_s, "token_hit_rate"), "-",
                     _ratio(sim[3], base_s), "-", "-"])
    console.print(markdown_table(["replicas", "hit sim", "hit live", "Δ hit sim", "Δ hit live", "latency ×1 sim",
                                  "latency ×1 live", "programs exact"], rows), highlight=False)
    lv = data.get("live") or {}
    for f in lv.get("flood", []):
        console.print(f"flood, {f['replicas']} replica(s): gold's share of the service "
                      f"{f['tenant_share'].get('gold', 0):.3f} (its weight's share: 0.667)", highlight=False)
    for part in ("kill", "outage"):
        if part in lv:
            m = lv[part]
            console.print(f"{part}: {m['answered']}/{m['calls']} answered, {m['cut_in_flight']} cut in flight, "
                          f"{m['server_errors']} 5xx, programs exact {m['programs_exact']}/{m['programs']}",
                          highlight=False)
    if "cost" in lv:
        c = lv["cost"]
        console.print(f"cost of sharing: {c['with_state_rps']:.0f} vs {c['without_state_rps']:.0f} req/s "
                      f"(×{c['ratio']:.2f})", highlight=False)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _delta(row: dict | None, base: dict | None, key: str) -> str:
    return "-" if row is None or base is None else f"{100 * (row[key] - base[key]):+.1f} pts"


def _ratio(row: dict | None, base: dict | None) -> str:
    if row is None or base is None or not base.get("mean_latency_s"):
        return "-"
    return f"{row['mean_latency_s'] / base['mean_latency_s']:.2f}"
