"""What a live run of `flowserve bench replicas` stands on: simulated engines behind HTTP
(`flowserve.engines.sim_server`, shared by every replica), a private redis-server, and N
`flowserve serve` processes. Every process is started here, waited for until it answers,
and stopped on exit, also when a later one fails to start."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from flowserve.bench.replicas_client import KEY
from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.replicas.redis_server import PrivateRedis

GPUS = ("A100-80G", "A100-80G", "A6000", "A6000")  # Hetero-1 (Hexgen's): Llama-3.1-70B, TP 8 each
LLM = "llama-3.1-70b"
TP = 8


@dataclass(frozen=True)
class Engines:
    urls: dict[str, str]  # instance → base URL


@contextlib.contextmanager
def sim_engines(folder: Path, time_scale: float, gpus: tuple[str, ...] = GPUS) -> Iterator[Engines]:
    folder.mkdir(parents=True, exist_ok=True)
    ports = {f"e{i}": free_port() for i in range(len(gpus))}
    spec = {"time_scale": time_scale, "instances": [{"name": n, "gpu": g, "model": LLM, "tp": TP, "port": p}
                                                     for (n, p), g in zip(ports.items(), gpus, strict=True)]}
    path = folder / "engines.json"
    path.write_text(json.dumps(spec))
    first = next(iter(ports.values()))
    with served([sys.executable, "-m", "flowserve.engines.sim_server", str(path)],
                f"http://127.0.0.1:{first}/health", folder / "engines.log"):
        yield Engines({n: f"http://127.0.0.1:{p}" for n, p in ports.items()})


def serve_yaml(folder: Path, engines: Engines, gateway: Mapping[str, Any], gpus: tuple[str, ...] = GPUS) -> Path:
    """The serving config every replica runs (the same config: the same version)."""
    path = folder / "serve.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": n, "gpu": g, "model": LLM, "tp": TP, "backend": "openai", "url": u}
                      for (n, u), g in zip(engines.urls.items(), gpus, strict=True)],
        "api_keys": {KEY: {"tenant": "gold", "acts_for": ["*"]}},  # the client acts for both tenants (x-tenant)
        "gateway": {"engine_kinds": dict.fromkeys(engines.urls, "vllm"), **gateway}}))
    return path


@dataclass
class FleetReplica:
    url: str
    pid: int


@contextlib.contextmanager
def replicas(folder: Path, config: Path, n: int, state_url: str | None) -> Iterator[list[FleetReplica]]:
    with contextlib.ExitStack() as stack:
        out = []
        for i in range(n):
            port = free_port()
            args = [sys.executable, "-m", "flowserve.cli", "serve", "--config", str(config), "--port", str(port),
                    "--log-level", "warning", *(["--state-url", state_url] if state_url else [])]
            proc = stack.enter_context(served(args, f"http://127.0.0.1:{port}/health", folder / f"replica{i}.log"))
            out.append(FleetReplica(f"http://127.0.0.1:{port}", proc.pid))
        yield out


@contextlib.contextmanager
def redis(folder: Path) -> Iterator[PrivateRedis]:
    with PrivateRedis(folder=folder / "redis") as server:
        yield server
