"""`flowserve bench live`: the live benchmarks (never timed unit tests).

* overhead — the gateway's cost per request: the same client sends the same requests to
  (a) the gateway over simulated engines whose calls take microseconds (time scale 10⁶)
  and (b) a bare uvicorn app that answers a fixed completion body; p50/p99 of each,
  sequential and with 8 concurrent clients, and the difference = the gateway's overhead.
* prefix — two llama-server instances (1 thread, 4 slot caches each, `--cache-ram 0`,
  one sequence at a time) behind the driver; a shared-prefix workload (8 long prefixes,
  Poisson arrivals: together more than one engine's slots, half of them fit) is
  replayed under each dispatch policy (fresh token ids per run); mean/p99 latency,
  engine-reported token hit rate, and the ratio first policy / last policy measured in
  one run. The same workload is also simulated with the engines' fitted profile.
* validate — `flowserve validate` against one llama-server (profiled first).
* admission — `max_queue_s` at a sustained load and at 3× (`flowserve.bench.admission_bench`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml
from rich.console import Console

from flowserve.calibrate.profiler import ProfileSettings, engine_facts, profile_engine
from flowserve.calibrate.replay import hit_rate, replay_live
from flowserve.calibrate.validate import engine_instance
from flowserve.engines.client import EngineClient
from flowserve.engines.llamacpp_build import ensure_llama_server
from flowserve.engines.llamacpp_server import LlamaServer, free_port
from flowserve.engines.tinymodel import TinyModel, write_tiny_llama
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.loadtest.procs import llama_servers, served
from flowserve.metrics.tables import markdown_table, ratio, write_json
from flowserve.sim.run import PolicySpec, simulate
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.workloads.shared_prefix import shared_prefix_workload

OUT = Path("out/bench-live")
SLOTS, PREFIXES = 4, 8  # per engine; in the shared-prefix workload


def pcts(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99)),
            "n": len(values)}


# --------------------------------------------------------------------------- overhead


def bare_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    body = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "text": "ok", "logprobs": None, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    async def complete(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse(body)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/completions", complete, methods=["POST"]), Route("/health", health)])


def _latencies(url: str, n: int, concurrency: int, model: str) -> tuple[list[float], float]:
    prompt = "select the total amount of loans per district and year " * 10
    clients: dict[int, httpx.Client] = {}  # one per worker thread

    def one(i: int) -> float:
        http = clients.get(threading.get_ident())
        if http is None:
            http = clients[threading.get_ident()] = httpx.Client(base_url=url, timeout=30,
                                                                 headers={"authorization": "Bearer bench"})
        t = time.perf_counter()
        r = http.post("/v1/completions", json={"model": model, "prompt": f"{i} {prompt}", "max_tokens": 1})
        r.raise_for_status()
        return time.perf_counter() - t

    for i in range(20):  # warm connections and code paths
        one(-i)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        lats = list(pool.map(one, range(n)))
    rate = n / (time.perf_counter() - t0)
    for http in clients.values():
        http.close()
    return lats, rate


@contextlib.contextmanager
def _process(args: list[str], port: int, log: Path) -> Iterator[str]:
    """A server in its own process (so the client's threads do not share its GIL)."""
    url = f"http://127.0.0.1:{port}"
    with served(args, f"{url}/health", log, poll_s=0.05):
        yield url


def overhead_bench(n: int, console: Console) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    cfg = OUT / "overhead-serve.yaml"
    cfg.write_text(yaml.safe_dump({"instances": [{"name": "sim", "gpu": "H100", "model": "llama-3.1-8b", "count": 2}],
                                   "api_keys": ["bench"], "gateway": {"time_scale": 1e6}}))
    gw_port, bare_port = free_port(), free_port()
    gw_cmd = [sys.executable, "-c", "from flowserve.cli import main; main()", "serve", "--config", str(cfg),
              "--port", str(gw_port), "--log-level", "warning"]
    bare_cmd = [sys.executable, "-m", "uvicorn", "--factory", "flowserve.bench.live:bare_app", "--port",
                str(bare_port), "--log-level", "warning"]
    out: dict[str, Any] = {}
    with _process(gw_cmd, gw_port, OUT / "gateway.log") as gw, _process(bare_cmd, bare_port, OUT / "bare.log") as bare:
        for conc in (1, 8):
            g, g_rps = _latencies(gw, n, conc, "llama-3.1-8b")
            b, b_rps = _latencies(bare, n, conc, "m")
            out[f"concurrency_{conc}"] = {
                "gateway_s": pcts(g), "bare_http_s": pcts(b), "gateway_rps": g_rps, "bare_rps": b_rps,
                "overhead_p50_ms": 1e3 * (np.percentile(g, 50) - np.percentile(b, 50)),
                "overhead_p99_ms": 1e3 * (np.percentile(g, 99) - np.percentile(b, 99)),
                "latency_ratio_p50": float(np.percentile(g, 50) / np.percentile(b, 50))}
    rows = [[k, 1e3 * v["gateway_s"]["p50"], 1e3 * v["gateway_s"]["p99"], 1e3 * v["bare_http_s"]["p50"],
             1e3 * v["bare_http_s"]["p99"], v["overhead_p50_ms"], v["overhead_p99_ms"], v["gateway_rps"]]
            for k, v in out.items()]
    console.print(markdown_table(["run", "gateway p50 ms", "gateway p99 ms", "bare p50 ms", "bare p99 ms",
                                  "overhead p50 ms", "overhead p99 ms", "gateway req/s"], rows), highlight=False)
    return out


# --------------------------------------------------------------------------- llama-server parts


async def _profile(server: LlamaServer, path: Path, settings: ProfileSettings) -> Path:
    async with EngineClient(server.base_url, model="tiny-llama", engine="llamacpp") as c:
        facts = await engine_facts(c)
        fitted, _ = await profile_engine(c, "tiny-llama", settings, facts, slot_config=server.slot_config())
    fitted.save(path)
    return path


def prefix_bench(policies: Sequence[str], queries: int, rate: float, model: Path, binary: Path,
                 console: Console, say: Callable[[str], None]) -> dict[str, Any]:
    with llama_servers(2, model, binary, SLOTS, OUT) as servers:
        say("profiling the engine")
        profile = asyncio.run(_profile(servers[0], OUT / "tiny-np2.yaml", ProfileSettings()))
        # one sequence at a time per engine (one CPU thread); its SLOTS slot caches keep prefixes
        specs = [dataclasses.replace(engine_instance(s.base_url, profile, f"llama{i}"), max_inflight=1)
                 for i, s in enumerate(servers)]
        wl = shared_prefix_workload(queries, rate, prefixes=PREFIXES, prefix_tokens=1500, suffix_tokens=32,
                                    output_tokens=16, seed=11)
        runs: dict[str, Any] = {}
        for k, policy in enumerate(policies):
            say(f"replaying {queries} queries under {policy}")

            async def go(policy: str = policy, salt: int = 100 + k) -> Any:
                d = compose_driver(specs, GatewaySettings(dispatch=policy), output_priors=dict(wl.output_priors),
                                   segments=TokenMaterializer(900, salt))
                await d.start()
                try:
                    return await replay_live(d, wl), d.instances()
                finally:
                    await d.shutdown()

            outcomes, insts = asyncio.run(go())
            lat = [o.latency_s for o in outcomes if o.latency_s is not None]
            sims = [dataclasses.replace(s, backend="sim", url=None, reports_capacity=True) for s in specs]
            sim = simulate(sims, wl, PolicySpec(policy))
            sim_lat = [q.latency for q in sim.queries if q.failed is None]
            runs[policy] = {"latency_s": pcts(lat), "failed": len(outcomes) - len(lat),
                            "token_hit_rate": hit_rate(outcomes),
                            "calls_per_instance": {i["name"]: i["completed"] for i in insts},
                            "sim_latency_s": pcts(sim_lat)}
    first, last = runs[policies[0]], runs[policies[-1]]
    summary = {"workload": {"queries": queries, "rate": rate, "prefixes": PREFIXES, "prefix_tokens": 1500,
                            "suffix_tokens": 32, "output_tokens": 16},
               "engines": f"2 × llama-server, 1 thread, -np {SLOTS} --cache-ram 0 -c 8192, max_inflight 1, "
                          "tiny random Llama",
               "runs": runs,
               "mean_ratio": ratio(last["latency_s"]["mean"], first["latency_s"]["mean"]),
               "p99_ratio": ratio(last["latency_s"]["p99"], first["latency_s"]["p99"]),
               "sim_mean_ratio": ratio(last["sim_latency_s"]["mean"], first["sim_latency_s"]["mean"]),
               "goal_ratio": 1.5}
    rows = [[p, r["latency_s"]["mean"], r["latency_s"]["p50"], r["latency_s"]["p99"], r["token_hit_rate"],
             r["failed"], r["sim_latency_s"]["mean"]] for p, r in runs.items()]
    console.print(markdown_table(["policy", "mean s", "p50 s", "p99 s", "hit rate", "failed", "sim mean s"], rows),
                  highlight=False)
    summary["sim_ratio_error_pct"] = 100.0 * abs(summary["sim_mean_ratio"] / summary["mean_ratio"] - 1.0)
    console.print(f"{policies[-1]} / {policies[0]}: mean {summary['mean_ratio']:.2f}× measured, "
                  f"{summary['sim_mean_ratio']:.2f}× predicted by the simulator (off by "
                  f"{summary['sim_ratio_error_pct']:.0f}%, goal ≤ 25%); p99 {summary['p99_ratio']:.2f}× "
                  f"(goal ≥ 1.5×)", highlight=False)
    return summary


def validate_bench(model: Path, binary: Path, console: Console, say: Callable[[str], None]) -> dict[str, Any]:
    """`flowserve validate` three times against one pinned llama-server, with the ablation
    (`flowserve.bench.fidelity`)."""
    from flowserve.bench.fidelity import llama_fidelity

    return llama_fidelity(model, binary, console, say, OUT)


def peer_part(model: TinyModel, binary: Path, queries: int, rate: float, reps: int, slots: Sequence[int],
              console: Console, say: Callable[[str], None], seed: int = 0) -> dict[str, Any]:
    """flowserve serve against sglang-router on the same two llama-servers (`bench.peer_live`);
    the engines' profile (for flowserve) is fitted once, on a fresh server."""
    from flowserve.bench.peer_live import peer_bench, table

    with llama_servers(1, model.gguf, binary, SLOTS, OUT) as (server,):
        say("profiling the engine")
        profile = asyncio.run(_profile(server, OUT / "tiny-np4.yaml", ProfileSettings()))
    data = peer_bench(model, binary, profile, OUT / "peer", queries, rate, reps, slots, say, seed)
    console.print(table(data["summary"]), highlight=False)
    return data


def run_live_bench(json_out: Path, console: Console, policies: Sequence[str], queries: int, rate: float,
                   overhead_requests: int, parts: set[str], reps: int = 3,
                   slots: Sequence[int] = (1, 4), seed: int = 0) -> dict[str, Any]:
    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/]")

    data: dict[str, Any] = {"bench": "live", "python": platform.python_version(), "machine": platform.machine(),
                            "cpus_note": "timings on a shared machine: compare ratios, not absolutes"}
    if "overhead" in parts:
        say("gateway overhead with simulated engines")
        data["gateway_overhead"] = overhead_bench(overhead_requests, console)
    if "admission" in parts:
        from flowserve.bench.admission_bench import admission_bench

        say("admission control at a sustained load and at 3x (simulated A100s)")
        data["admission"] = admission_bench(console)
    if parts & {"prefix", "validate", "peer"}:
        binary = ensure_llama_server(progress=say)
        tiny = write_tiny_llama(OUT / "tiny.gguf")
        model = tiny.gguf
        if "peer" in parts:
            data["peer"] = peer_part(tiny, binary, queries, rate, reps, slots, console, say, seed)
        if "prefix" in parts:
            data["prefix"] = prefix_bench(policies, queries, rate, model, binary, console, say)
        if "validate" in parts:
            data["validate"] = validate_bench(model, binary, console, say)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data

