"""Replicas as real processes (`flowserve serve`) sharing a real Redis: a wrong state URL is
one line and exit 2; `--workers 2` shares a private redis-server; a replica killed with
SIGKILL loses only its calls in flight, and its programs go on at the other."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import yaml
from live_support import MODEL, poll_until

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.replicas.redis_server import PrivateRedis

KEY = "sk-procs"
AUTH = {"authorization": f"Bearer {KEY}"}
OPERATOR = {KEY: {"tenant": "default", "acts_for": ["*"]}}  # x-tenant names any tenant
CLI = [sys.executable, "-c", "from flowserve.cli import app; app()"]


def write_config(path: Path, **gateway: object) -> Path:
    path.write_text(yaml.safe_dump({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}], "api_keys": OPERATOR,
        "gateway": {"time_scale": 50.0, "dispatch": "flowserve", "queue": "flowserve", **gateway}}))
    return path


def serve(tmp_path: Path, cfg: Path, name: str, *extra: str) -> tuple[list[str], str, Path]:
    port = free_port()
    return ([*CLI, "serve", "--config", str(cfg), "--port", str(port), "--log-level", "warning", *extra],
            f"http://127.0.0.1:{port}", tmp_path / f"{name}.log")


def call(url: str, program: str, prompt: str, max_tokens: int = 3, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", headers={**AUTH, "x-flowserve-program": program},
                      json={"model": MODEL, "prompt": prompt, "max_tokens": max_tokens}, timeout=timeout)


def test_an_unreachable_state_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "serve.yaml")
    port = free_port()
    for url, says in ((f"redis://127.0.0.1:{port}/0", "Redis does not answer"), ("mysql://x/0", "expected redis://")):
        out = subprocess.run([*CLI, "serve", "--config", str(cfg), "--state-url", url, "--port", str(free_port())],
                             capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"})
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], out.stderr


def test_workers_share_a_private_redis(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "serve.yaml")
    args, url, log = serve(tmp_path, cfg, "workers", "--workers", "2")
    with served(args, f"{url}/health", log):
        poll_until(lambda: httpx.get(f"{url}/health").json()["state"]["peers"] == 1, 20, "both workers joined")
        answers = [call(url, "w", f"step {i}") for i in range(6)]  # a new connection each: either worker
        assert all(r.status_code == 200 for r in answers)
        summary = httpx.delete(f"{url}/v1/programs/w", headers=AUTH).json()
        assert summary["calls"] == 6 and summary["output_tokens"] == 18
        assert summary["prompt_tokens"] == sum(r.json()["usage"]["prompt_tokens"] for r in answers)


@pytest.fixture
def two_replicas(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    with ExitStack() as stack:
        redis = stack.enter_context(PrivateRedis())
        cfg = write_config(tmp_path / "serve.yaml", time_scale=1.0,
                           state={"url": redis.url, "sync_ms": 10, "heartbeat_s": 0.5})
        a_args, a_url, a_log = serve(tmp_path, cfg, "a")
        b_args, b_url, b_log = serve(tmp_path, cfg, "b")
        a = stack.enter_context(served(a_args, f"{a_url}/health", a_log))
        stack.enter_context(served(b_args, f"{b_url}/health", b_log))
        poll_until(lambda: httpx.get(f"{b_url}/health").json()["state"]["peers"] == 1, 20,
                   "the replicas see each other")
        yield a, a_url, b_url


def test_a_killed_replica_loses_only_its_calls_in_flight(
        two_replicas: tuple[subprocess.Popen[bytes], str, str]) -> None:
    a, a_url, b_url = two_replicas
    assert call(a_url, "survivor", "opened at a").status_code == 200
    assert call(b_url, "survivor", "then at b").status_code == 200
    outcome: dict[str, object] = {}

    def long_call() -> None:  # about 2 s of decoding on the simulated A100
        try:
            outcome["response"] = call(a_url, "survivor", "a long answer", max_tokens=200)
        except httpx.HTTPError as e:
            outcome["error"] = e

    t = threading.Thread(target=long_call)
    t.start()
    poll_until(lambda: httpx.get(f"{b_url}/v1/programs/survivor", headers=AUTH).json()["calls_in_flight"] == 1, 20,
               "the long call in flight at a")
    os.kill(a.pid, signal.SIGKILL)
    t.join(30)
    assert "error" in outcome  # its client sees the replica die: a clear error, never an answer twice
    poll_until(lambda: httpx.get(f"{b_url}/health").json()["state"]["peers"] == 0, 5, "a's share expired")
    state = httpx.get(f"{b_url}/v1/programs/survivor", headers=AUTH).json()
    assert state["calls"] == 3 and state["calls_in_flight"] == 0  # a's call in flight is not b's to wait for
    for i in range(2):  # the program goes on at b
        assert call(b_url, "survivor", f"after the kill {i}").status_code == 200
    summary = httpx.delete(f"{b_url}/v1/programs/survivor", headers=AUTH).json()
    assert summary["calls"] == 5 and summary["lost_calls"] == 1 and summary["failed_calls"] == 1
    assert summary["output_tokens"] == 4 * 3
