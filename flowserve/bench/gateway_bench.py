"""`flowserve bench gateway`: the gateway's data plane against the bare engine and against
`sglang-router` (`cache_aware`), side by side in one run (issue 10).

Every process is separate: the instant backend (`flowserve.loadtest.instant_backend`), the
router under test (`flowserve serve` once per dispatch policy; `sglang-router` when the
`bench` extra is installed; none for the bare backend) and the load client
(`flowserve.loadtest.load_client`, the project's raw HTTP/1.1 client on uvloop: wrk is
not installed on this machine, and the same client frames SSE streams). For 1 and 32
concurrent clients, non-streaming and streaming (64 tokens), each cell runs `seconds`
and reports req/s, p50/p99 latency, the latency the router adds over the bare backend
(p50/p99 differences), and the router's CPU seconds
per 1,000 requests (its process tree's user+system time, read from /proc).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rich.console import Console

from flowserve.engines.llamacpp_server import free_port
from flowserve.errors import FlowserveError
from flowserve.loadtest.procs import served
from flowserve.metrics.tables import markdown_table, write_json

CELLS = ((1, False), (32, False), (1, True), (32, True))
MODEL = "llama-3.1-8b"


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


def load(url: str, clients: int, seconds: float, stream: bool) -> dict[str, Any]:
    args = [sys.executable, "-m", "flowserve.loadtest.load_client", url, str(clients), str(seconds),
            "1" if stream else "0"]
    for _attempt in range(2):  # a router still warming its connections may refuse the first one
        out = subprocess.run(args, capture_output=True, text=True, check=False)
        if out.returncode == 0:
            return json.loads(out.stdout)
    raise FlowserveError(f"the load client failed against {url}: {out.stderr.strip().splitlines()[-1:]}")


def measure(name: str, base: str, pid: int, seconds: float) -> dict[str, Any]:
    cells = {}
    for clients, stream in CELLS:
        cpu0 = tree_cpu_s(pid)
        r = load(f"{base}/v1/completions", clients, seconds, stream)
        cpu = tree_cpu_s(pid) - cpu0
        lat = np.asarray(r["latency_ms"] or [float("nan")])
        n = r["requests"]
        cells[f"{clients}c-{'stream' if stream else 'plain'}"] = {
            "clients": clients, "stream": stream, "requests": n, "errors": r["errors"],
            "req_per_s": n / r["seconds"], "tokens_per_s": r["chunks"] / r["seconds"] if stream else None,
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "cpu_s_per_1000": cpu / n * 1000 if n else None}
    return {"target": name, "cells": cells}


def flowserve_config(tmp: Path, backend: str, policy: str, workers: int = 1) -> Path:
    path = tmp / f"serve-{policy}.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": f"instant{i}", "gpu": "A100-80G", "model": MODEL, "backend": "openai",
                       "url": backend} for i in range(2)],
        "gateway": {"dispatch": policy, "engine_kinds": {"instant0": "openai", "instant1": "openai"}}}))
    return path


def run_gateway_bench(json_out: Path, console: Console, policies: Sequence[str], seconds: float = 2.0,
                      workers: Sequence[int] = (1,), sglang: bool = True, out_dir: Path = Path("out/bench-gateway"),
                      gateway_src: Path | None = None) -> dict[str, Any]:
    """gateway_src: run `flowserve serve` from another source tree (a before/after run)."""
    env = None
    out_dir = out_dir.resolve()
    if gateway_src is not None:  # run from there: `python -c` puts the working directory first on sys.path
        gateway_src = gateway_src.resolve()
        env = {**os.environ, "PYTHONPATH": str(gateway_src)}
    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/]")

    results: list[dict[str, Any]] = []
    notes: list[str] = []
    bport = free_port()
    backend = f"http://127.0.0.1:{bport}"
    py = sys.executable
    with served([py, "-m", "flowserve.loadtest.instant_backend", str(bport)], f"{backend}/health",
                 out_dir / "backend.log") as bproc:
        say("bare backend")
        results.append(measure("backend alone", backend, bproc.pid, seconds))
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
                    results.append(measure("sglang-router cache_aware", f"http://127.0.0.1:{port}", proc.pid,
                                           seconds))
        for w in workers:
            for policy in policies:
                port = free_port()
                cfg = flowserve_config(out_dir, backend, policy)
                name = f"flowserve {policy}" + (f" ×{w} processes" if w > 1 else "")
                say(name)
                cli = [py, "-c", "from flowserve.cli import app; app()", "serve", "--config", str(cfg),
                       "--port", str(port), "--log-level", "warning", *(["--workers", str(w)] if w > 1 else [])]
                with served(cli, f"http://127.0.0.1:{port}/health", out_dir / f"flowserve-{policy}-{w}.log",
                             env=env, cwd=gateway_src) as proc:
                    results.append(measure(name, f"http://127.0.0.1:{port}", proc.pid, seconds))
    bare = results[0]["cells"]
    for r in results:
        for key, c in r["cells"].items():
            c["added_p50_ms"] = c["p50_ms"] - bare[key]["p50_ms"]
            c["added_p99_ms"] = c["p99_ms"] - bare[key]["p99_ms"]
    rows = []
    for r in results:
        for key, c in r["cells"].items():
            rows.append([r["target"], key, round(c["req_per_s"]), round(c["p50_ms"], 2), round(c["added_p50_ms"], 2),
                         round(c["added_p99_ms"], 2), "-" if c["cpu_s_per_1000"] is None
                         else round(c["cpu_s_per_1000"], 2), round(c["tokens_per_s"]) if c["tokens_per_s"] else "-",
                         c["errors"]])
    console.print(markdown_table(["target", "cell", "req/s", "p50 ms", "added p50 ms", "added p99 ms",
                                  "CPU s/1000 req", "tokens/s", "errors"], rows), highlight=False)
    data = {"bench": "gateway", "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "load_client": "flowserve.loadtest.load_client (raw HTTP/1.1 on uvloop)",
            "wrk_installed": shutil.which("wrk") is not None,
            "seconds_per_cell": seconds, "gateway_src": str(gateway_src) if gateway_src else None,
            "notes": notes, "results": results}
    for n in notes:
        console.print(n)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data
