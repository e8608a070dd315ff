"""The cost of sharing: one replica with a state URL against one without, on an instant
engine (`flowserve.bench.instant_backend`), measured with wrk (Debian's `wrk`) back to
back, each after a warm-up."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from flowserve.bench.procs import served
from flowserve.bench.replicas_client import KEY
from flowserve.bench.replicas_fleet import replicas
from flowserve.engines.llamacpp_server import free_port
from flowserve.replicas.redis_server import PrivateRedis

BODY = '{"model": "llama-3.1-8b", "prompt": [11, 12, 13, 14, 15, 16, 17, 18], "max_tokens": 1}'


def wrk(url: str, folder: Path, seconds: float, connections: int) -> dict[str, Any]:
    script = folder / "post.lua"
    script.write_text(f'wrk.method = "POST"\nwrk.body = \'{BODY}\'\nwrk.headers["Content-Type"] = '
                      f'"application/json"\nwrk.headers["Authorization"] = "Bearer {KEY}"\n')
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", str(script), f"{url}/v1/completions"]
    out = subprocess.run(args, capture_output=True, text=True, check=False, timeout=seconds + 60).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    return {"req_per_s": float(rps.group(1)) if rps else 0.0, "non_2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": errors.group(0) if errors else None}


def sharing_cost(folder: Path, seconds: float = 10.0, connections: int = 32) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        return {"error": "wrk is not installed (Debian: apt-get install wrk)"}
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    engine = f"http://127.0.0.1:{port}"
    cfg = folder / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "instances": [{"name": f"instant{i}", "gpu": "A100-80G", "model": "llama-3.1-8b", "backend": "openai",
                       "url": engine} for i in range(2)],
        "api_keys": [KEY], "gateway": {"dispatch": "round_robin", "engine_kinds": {"instant0": "openai",
                                                                                   "instant1": "openai"}}}))
    out: dict[str, Any] = {"seconds": seconds, "connections": connections}
    with served([sys.executable, "-m", "flowserve.bench.instant_backend", str(port)], f"{engine}/health",
                folder / "engine.log"), PrivateRedis(folder=folder / "redis") as state:
        for label, url in (("without_state", None), ("with_state", state.url)):
            with replicas(folder / label, cfg, 1, url) as [rep]:
                wrk(rep.url, folder, 2.0, connections)  # warm-up: connections, caches
                out[label] = wrk(rep.url, folder, seconds, connections)
    out["without_state_rps"] = out["without_state"]["req_per_s"]
    out["with_state_rps"] = out["with_state"]["req_per_s"]
    out["ratio"] = out["with_state_rps"] / out["without_state_rps"] if out["without_state_rps"] else 0.0
    return out
