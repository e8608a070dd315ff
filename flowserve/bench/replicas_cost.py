"""The cost of sharing: one replica with a state URL against one without, on an instant
engine (`flowserve.loadtest.instant_backend`), measured with wrk (`flowserve.loadtest.wrk`)
back to back, each after a warm-up."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from flowserve.bench.replicas_fleet import replicas
from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.loadtest.wrk import run_load
from flowserve.replicas.redis_server import PrivateRedis

MODEL = "llama-3.1-8b"


def sharing_cost(folder: Path, seconds: float = 10.0, connections: int = 32) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    engine = f"http://127.0.0.1:{port}"
    cfg = folder / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "instances": [{"name": f"instant{i}", "gpu": "A100-80G", "model": MODEL, "backend": "openai",
                       "url": engine} for i in range(2)],
        "api_keys": ["bench"], "gateway": {"dispatch": "round_robin", "engine_kinds": {"instant0": "openai",
                                                                                       "instant1": "openai"}}}))
    out: dict[str, Any] = {"seconds": seconds, "connections": connections}
    with served([sys.executable, "-m", "flowserve.loadtest.instant_backend", str(port)], f"{engine}/health",
                folder / "engine.log"), PrivateRedis(folder=folder / "redis") as state:
        for label, url in (("without_state", None), ("with_state", state.url)):
            with replicas(folder / label, cfg, 1, url) as [rep]:
                target = f"{rep.url}/v1/completions"
                run_load(target, connections, 2.0, False, MODEL, folder)  # warm-up: connections, tokenizations
                out[label] = run_load(target, connections, seconds, False, MODEL, folder)
    out["without_state_rps"] = out["without_state"]["req_per_s"]
    out["with_state_rps"] = out["with_state"]["req_per_s"]
    out["ratio"] = out["with_state_rps"] / out["without_state_rps"] if out["without_state_rps"] else 0.0
    return out
