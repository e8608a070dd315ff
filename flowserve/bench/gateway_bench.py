"""`flowserve bench gateway`: flowserve's data planes against the bare engine and against
`sglang-router` (`cache_aware`), side by side in one run, measured with wrk (or, without
it, flowserve's slower Python load generator, which says when it was the bottleneck).

Every process is separate: the instant backend (`flowserve.loadtest.instant_backend`), the
router under test and wrk (`flowserve.loadtest.wrk`). The routers, per dispatch policy:

* `gateway`: `flowserve serve` (optionally N processes on one port);
* `picker`: Envoy in front of the engine with `flowserve epp` as its endpoint picker
  (examples/envoy/picker.yaml: the pick over ext_proc, Envoy carries the bytes);
* `replicas`: Envoy in front of two `flowserve serve` replicas (examples/envoy/replicas.yaml).

For 1 and 32 concurrent clients, non-streaming and streaming (64 tokens), each cell runs
`seconds` and reports req/s, p50/p99 latency, the latency the router adds over the bare
backend, errors and the router's CPU seconds per 1,000 requests (its processes' trees,
Envoy's included, read from /proc).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from flowserve.engines.llamacpp_server import free_port
from flowserve.host.settings import load_serve_config
from flowserve.loadtest.instant_backend import STREAM_TOKENS
from flowserve.loadtest.procs import served
from flowserve.loadtest.pyload import SATURATED
from flowserve.loadtest.wrk import PYLOAD_NOTE, run_load
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.picker.envoy import Envoy, envoy_endpoints, render

CELLS = ((1, False), (32, False), (1, True), (32, True))
MODEL = "llama-3.1-8b"
SHAPES = ("gateway", "picker", "replicas")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envoy"
ENVOY_WORKERS = 2


def tree_cpu_s(pid: int) -> float:
    """User + system seconds of a process and its descendants (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += times.get(p, 0.0)
        todo.extend(c for c, pp in parents.items() if pp == p)
    return total


def measure(name: str, base: str, pids: Sequence[int], seconds: float, work_dir: Path) -> dict[str, Any]:
    cells = {}
    for clients, stream in CELLS:
        cpu0 = sum(tree_cpu_s(p) for p in pids)
        r = run_load(f"{base}/v1/completions", clients, seconds, stream, MODEL, work_dir)
        cpu = sum(tree_cpu_s(p) for p in pids) - cpu0
        n = r["requests"]
        cells[f"{clients}c-{'stream' if stream else 'plain'}"] = {
            "clients": clients, "stream": stream, "requests": n, "errors": r["errors"],
            "req_per_s": r["req_per_s"], "tokens_per_s": r["req_per_s"] * STREAM_TOKENS if stream else None,
            "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "cpu_s_per_1000": cpu / n * 1000 if n else None,
            "client": r["client"], "client_cpu_share": r.get("client_cpu_share")}
    return {"target": name, "cells": cells}


def flowserve_config(tmp: Path, backend: str, policy: str, workers: int = 1) -> Path:
    path = tmp / f"serve-{policy}.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": f"instant{i}", "gpu": "A100-80G", "model": MODEL, "backend": "openai",
                       "url": backend} for i in range(2)],
        "gateway": {"dispatch": policy, "engine_kinds": {"instant0": "openai", "instant1": "openai"}}}))
    return path


@contextlib.contextmanager
def envoy_in_front(template: str, values: dict[str, object], log: Path) -> Iterator[tuple[str, int]]:
    """The wheel's Envoy on an example config: (its URL, its pid)."""
    if not (EXAMPLES / template).is_file():
        raise FileNotFoundError(f"{EXAMPLES / template}: run the Envoy shapes from a flowserve checkout")
    listen, admin = free_port(), free_port()
    text = render(EXAMPLES / template, {"LISTEN_PORT": listen, "ADMIN_PORT": admin, **values})
    with Envoy(text, admin, log, concurrency=ENVOY_WORKERS) as e:
        assert e.proc is not None
        yield f"http://127.0.0.1:{listen}", e.proc.pid


def run_gateway_bench(json_out: Path, console: Console, policies: Sequence[str], seconds: float = 2.0,
                      workers: Sequence[int] = (1,), sglang: bool = True, out_dir: Path = Path("out/bench-gateway"),
                      gateway_src: Path | None = None, shapes: Sequence[str] = SHAPES,
                      body_mode: str = "BUFFERED") -> dict[str, Any]:
    """gateway_src: run `flowserve serve` and `flowserve epp` from another source tree (a
    before/after run); body_mode: how Envoy sends request bodies to the picker."""
    env = None
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if gateway_src is not None:  # run from there: `python -c` puts the working directory first on sys.path
        gateway_src = gateway_src.resolve()
        env = {**os.environ, "PYTHONPATH": str(gateway_src)}

    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/]")

    results: list[dict[str, Any]] = []
    with_wrk = shutil.which("wrk") is not None
    notes: list[str] = [] if with_wrk else [PYLOAD_NOTE]
    bport = free_port()
    backend = f"http://127.0.0.1:{bport}"
    py = sys.executable
    cli = [py, "-c", "from flowserve.cli import app; app()"]

    def flowserve(args: list[str], health: str, log: str) -> contextlib.AbstractContextManager[Any]:
        return served([*cli, *args, "--log-level", "warning"], health, out_dir / log, env=env, cwd=gateway_src)

    with served([py, "-m", "flowserve.loadtest.instant_backend", str(bport)], f"{backend}/health",
                out_dir / "backend.log") as bproc:
        say("bare backend")
        results.append(measure("backend alone", backend, [bproc.pid], seconds, out_dir))
        if sglang:
            if importlib.util.find_spec("sglang_router") is None:
                notes.append("sglang-router is not installed (pip install -e '.[bench]'): peer skipped")
            else:
                port = free_port()
                say("sglang-router cache_aware")
                with served([py, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                             "--worker-urls", backend, backend.replace("127.0.0.1", "localhost"),
                             "--policy", "cache_aware", "--log-level", "warn"],
                            f"http://127.0.0.1:{port}/health", out_dir / "sglang-router.log") as proc:
                    results.append(measure("sglang-router cache_aware", f"http://127.0.0.1:{port}", [proc.pid],
                                           seconds, out_dir))
        for policy in policies:
            cfg = str(flowserve_config(out_dir, backend, policy))
            if "gateway" in shapes:
                for w in workers:
                    name = f"flowserve {policy}" + (f" ×{w} processes" if w > 1 else "")
                    say(name)
                    port = free_port()
                    with flowserve(["serve", "--config", cfg, "--port", str(port),
                                    *(["--workers", str(w)] if w > 1 else [])],
                                   f"http://127.0.0.1:{port}/health", f"flowserve-{policy}-{w}.log") as proc:
                        results.append(measure(name, f"http://127.0.0.1:{port}", [proc.pid], seconds, out_dir))
            if "picker" in shapes:
                name = f"Envoy + flowserve epp {policy}"
                say(name)
                port, mport = free_port(), free_port()
                with flowserve(["epp", "--config", cfg, "--port", str(port), "--metrics-port", str(mport)],
                               f"http://127.0.0.1:{mport}/health", f"epp-{policy}.log") as proc, \
                        envoy_in_front("picker.yaml", {"PICKER_PORT": port, "REQUEST_BODY_MODE": body_mode,
                                                       "ENGINE_ENDPOINTS": envoy_endpoints(load_serve_config(cfg)),
                                                       "RESPONSE_BODY_MODE": "STREAMED"},
                                       out_dir / f"envoy-epp-{policy}.log") as (url, epid):
                    results.append(measure(name, url, [proc.pid, epid], seconds, out_dir))
            if "replicas" in shapes:
                name = f"Envoy + 2 flowserve replicas {policy}"
                say(name)
                a, b = free_port(), free_port()
                with flowserve(["serve", "--config", cfg, "--port", str(a)], f"http://127.0.0.1:{a}/health",
                               f"replica-a-{policy}.log") as pa, \
                        flowserve(["serve", "--config", cfg, "--port", str(b)], f"http://127.0.0.1:{b}/health",
                                  f"replica-b-{policy}.log") as pb, \
                        envoy_in_front("replicas.yaml", {"REPLICA_A_PORT": a, "REPLICA_B_PORT": b},
                                       out_dir / f"envoy-replicas-{policy}.log") as (url, epid):
                    results.append(measure(name, url, [pa.pid, pb.pid, epid], seconds, out_dir))
    bare = results[0]["cells"]
    peer = next((r["cells"] for r in results if r["target"].startswith("sglang-router")), None)
    for r in results:
        for key, c in r["cells"].items():
            c["added_p50_ms"] = c["p50_ms"] - bare[key]["p50_ms"]
            c["added_p99_ms"] = c["p99_ms"] - bare[key]["p99_ms"]
            c["vs_sglang_router"] = c["req_per_s"] / peer[key]["req_per_s"] if peer and peer[key]["req_per_s"] else None
    rows = []
    for r in results:
        for key, c in r["cells"].items():
            rows.append([r["target"], key, round(c["req_per_s"]), "-" if c["vs_sglang_router"] is None
                         else f"{c['vs_sglang_router']:.2f}×", round(c["p50_ms"], 2), round(c["added_p50_ms"], 2),
                         round(c["added_p99_ms"], 2), "-" if c["cpu_s_per_1000"] is None
                         else round(c["cpu_s_per_1000"], 2), round(c["tokens_per_s"]) if c["tokens_per_s"] else "-",
                         c["errors"]])
    console.print(markdown_table(["target", "cell", "req/s", "vs sglang-router", "p50 ms", "added p50 ms",
                                  "added p99 ms", "CPU s/1000 req", "tokens/s", "errors"], rows), highlight=False)
    data = {"bench": "gateway", "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "load_client": "wrk (Lua: distinct prompts over 8 shared prefixes)" if with_wrk
            else "python (flowserve.loadtest.pyload: the same requests, slower than wrk)",
            "load_average": os.getloadavg(), "seconds_per_cell": seconds, "body_mode": body_mode,
            "envoy_workers": ENVOY_WORKERS, "gateway_src": str(gateway_src) if gateway_src else None,
            "notes": notes, "results": results}
    busy = sorted({f"{r['target']} {key}" for r in results for key, c in r["cells"].items()
                   if (c["client_cpu_share"] or 0.0) >= SATURATED})
    if busy:
        notes.append(f"the Python load generator used ≥ {SATURATED:.0%} of a core in {', '.join(busy)}: there "
                     f"req/s is the generator's limit, not the router's (install wrk to measure the router)")
    for n in notes:
        console.print(n)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data
