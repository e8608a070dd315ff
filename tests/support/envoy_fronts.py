"""The parts of the Envoy tests: flowserve processes (the endpoint picker, gateways) and the
wheel's Envoy on the examples' configs, all on 127.0.0.1, each a context manager that starts
and stops it (readiness by deadline-bounded polls, never a fixed sleep); requests bounded in
time; waits on conditions other processes make true."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from http_engine import HttpEngine
from repo_paths import ROOT

from flowserve.engines.llamacpp_server import free_port
from flowserve.host.settings import load_serve_config
from flowserve.loadtest.procs import served
from flowserve.picker.envoy import Envoy, envoy_endpoints, render

MODEL = "llama-3.1-8b"
EXAMPLES = ROOT / "examples" / "envoy"


def engines_config(path: Path, engines: list[HttpEngine], max_inflight: int | None = None,
                   api_keys: list[str] | dict[str, Any] | None = None, **gateway: Any) -> Path:
    """A serving YAML with one openai instance per engine (instance i ↔ engine i)."""
    extra = {"max_inflight": max_inflight} if max_inflight else {}
    instances = [{"name": f"i{k}", "gpu": "A100-80G", "model": MODEL, "backend": "openai", "url": e.url, **extra}
                 for k, e in enumerate(engines)]
    path.write_text(yaml.safe_dump({"instances": instances, "api_keys": api_keys or [], "gateway": {
        "engine_kinds": {f"i{k}": "openai" for k in range(len(engines))}, **gateway}}))
    return path


@dataclass(frozen=True)
class Picker:
    port: int  # gRPC: ext_proc and health
    metrics: str  # its /metrics URL
    pid: int
    engines: str  # its engines as Envoy's endpoints (picker.yaml's ENGINE_ENDPOINTS)


@contextlib.contextmanager
def picker(config: Path, log: Path, port: int | None = None) -> Iterator[Picker]:
    """`flowserve epp` as its own process."""
    port, metrics = port or free_port(), free_port()
    with served([sys.executable, "-m", "flowserve.cli", "epp", "--config", str(config), "--port", str(port),
                 "--metrics-port", str(metrics), "--log-level", "warning"],
                f"http://127.0.0.1:{metrics}/health", log) as proc:
        yield Picker(port, f"http://127.0.0.1:{metrics}/metrics", proc.pid,
                     envoy_endpoints(load_serve_config(config)))


@contextlib.contextmanager
def gateway(config: Path, log: Path, port: int | None = None) -> Iterator[str]:
    """`flowserve serve` as its own process: its URL."""
    port = port or free_port()
    with served([sys.executable, "-m", "flowserve.cli", "serve", "--config", str(config), "--port", str(port),
                 "--log-level", "warning"], f"http://127.0.0.1:{port}/health", log):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def envoy(template: str, log: Path, **values: Any) -> Iterator[tuple[str, Envoy]]:
    """The wheel's Envoy on an example config: (the URL clients use, the process)."""
    listen, admin = free_port(), free_port()
    text = render(EXAMPLES / template, {"LISTEN_PORT": listen, "ADMIN_PORT": admin, **values})
    with Envoy(text, admin, log) as e:
        yield f"http://127.0.0.1:{listen}", e


def post(url: str, body: Any = None, *, raw: bytes | None = None, headers: Any = None,
         timeout: float = 30.0) -> httpx.Response:
    """One request, bounded in time: a hang fails the test instead of stalling it."""
    if raw is not None:
        return httpx.post(url, content=raw, headers=headers, timeout=timeout)
    return httpx.post(url, json=body, headers=headers, timeout=timeout)


def metric(url: str, name: str) -> float:
    """The sum of a Prometheus series over its labels."""
    total = 0.0
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


def until(cond: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Wait for a condition another process makes true, re-checked until a deadline."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout_s:g} s")
        time.sleep(0.02)
