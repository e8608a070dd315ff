"""Envoy in front of two flowserve gateway replicas (examples/envoy/replicas.yaml): the wheel's
Envoy and two `flowserve serve` processes on simulated engines, sharing their state through a
private redis-server. A program's calls stay on one replica while it lives; killing a replica
loses no request that was not in flight on it (Envoy retries them on the other), active health
checks take the dead one out, and its programs go on at the other as the same programs."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from envoy_fronts import MODEL, envoy, post, until

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.replicas.redis_server import PrivateRedis


def sim_config(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "instances": [{"name": "s", "gpu": "A100-80G", "model": MODEL, "backend": "sim", "count": 2}],
        "gateway": {"time_scale": 20.0}}))
    return path


@dataclass
class Replicas:
    url: str  # Envoy
    ports: list[int]
    pids: list[int]
    admin: str


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """Module-wide: the test that kills a replica runs last."""
    tmp_path = tmp_path_factory.mktemp("replicas")
    cfg = sim_config(tmp_path / "serve.yaml")
    ports = [free_port(), free_port()]
    with ExitStack() as stack:
        cmd = serve_cmd(cfg, stack.enter_context(PrivateRedis()).url)
        a, b = (stack.enter_context(served([*cmd, str(port)], f"http://127.0.0.1:{port}/health", tmp_path / f"{n}.log"))
                for n, port in zip("ab", ports, strict=True))
        url, e = stack.enter_context(envoy("replicas.yaml", tmp_path / "envoy.log", REPLICA_A_PORT=ports[0],
                                           REPLICA_B_PORT=ports[1]))
        yield Replicas(url, ports, [a.pid, b.pid], e.admin)


def serve_cmd(config: Path, state_url: str) -> list[str]:
    return [sys.executable, "-m", "flowserve.cli", "serve", "--config", str(config), "--log-level", "warning",
            "--state-url", state_url, "--port"]


def call(url: str, program: str, k: int, max_tokens: int = 8) -> httpx.Response:
    return post(url + "/v1/chat/completions", {"model": MODEL, "max_tokens": max_tokens,
                                               "messages": [{"role": "user", "content": f"{program} step {k}"}]},
                headers={"x-flowserve-program": program})


def replica_port(r: httpx.Response) -> int:
    return int(r.headers["x-flowserve-replica"].rsplit(":", 1)[1])


def test_a_programs_calls_stay_on_one_replica(replicas: Replicas) -> None:
    where: dict[str, set[int]] = defaultdict(set)
    for k in range(3):
        for p in range(16):
            r = call(replicas.url, f"prog-{p}", k)
            assert r.status_code == 200, r.text
            where[f"prog-{p}"].add(replica_port(r))
    assert all(len(ports) == 1 for ports in where.values())
    assert {next(iter(p)) for p in where.values()} == set(replicas.ports)  # both replicas serve programs
    for prog in where:  # one replica served the whole program; both know it whole
        for port in replicas.ports:
            state = httpx.get(f"http://127.0.0.1:{port}/v1/programs/{prog}", timeout=10).json()
            assert state["calls"] == 3 and len(state["replicas"]) == 1


def test_killing_a_replica_loses_only_what_was_in_flight_on_it(replicas: Replicas) -> None:
    home = {}
    for p in range(8):  # where each program lives while both replicas do
        r = call(replicas.url, f"prog-{p}", 0)
        assert r.status_code == 200
        home[f"prog-{p}"] = replica_port(r)
    calls = {prog: httpx.get(f"http://127.0.0.1:{replicas.ports[1]}/v1/programs/{prog}", timeout=10).json()["calls"]
             for prog in home}  # the shared registry's count before the traffic
    victim = replicas.ports[0]
    assert victim in home.values()
    log: list[tuple[str, float, float, int, int | None]] = []  # program, start, end, status, replica
    stop = threading.Event()

    def client(prog: str) -> None:
        k = 1
        while not stop.is_set():
            t0 = time.monotonic()
            r = call(replicas.url, prog, k, max_tokens=64)
            log.append((prog, t0, time.monotonic(), r.status_code,
                        replica_port(r) if r.status_code == 200 else None))
            assert r.status_code == 200 or r.json()["error"]  # a failure is a JSON error, never a hang
            k += 1

    threads = [threading.Thread(target=client, args=(p,)) for p in home]
    for t in threads:
        t.start()
    until(lambda: len(log) >= 24, what="traffic on both replicas")
    os.kill(replicas.pids[0], signal.SIGKILL)
    t_kill = time.monotonic()
    n = len(log)
    until(lambda: len(log) >= n + 40, what="traffic after the kill")
    stop.set()
    for t in threads:
        t.join(30)
    failed = [e for e in log if e[3] != 200]
    assert all(start < t_kill for _, start, _, _, _ in failed)  # only requests already under way failed
    assert len(failed) <= sum(1 for port in home.values() if port == victim)  # at most one per client on the victim
    after = [e for e in log if e[1] > t_kill]
    assert len(after) >= 30 and all(e[3] == 200 and e[4] == replicas.ports[1] for e in after)
    moved = {prog for prog, port in home.items() if port == victim}
    assert moved and all(any(e[0] == prog for e in after) for prog in moved)  # its programs went on elsewhere
    survivor = f"http://127.0.0.1:{replicas.ports[1]}"
    for prog in moved:  # the same program at the survivor: the dead replica's calls counted, its in-flight lost
        sent = calls[prog] + sum(1 for e in log if e[0] == prog)
        answered = calls[prog] + sum(1 for e in log if e[0] == prog and e[3] == 200)
        summary = httpx.delete(f"{survivor}/v1/programs/{prog}", timeout=30).json()
        assert summary["status"] == "ended" and len(summary["replicas"]) == 2, summary
        assert answered <= summary["calls"] <= sent and summary["lost_calls"] <= 1
    # the active health check has taken the dead replica out (the first reset ejected it already)
    until(lambda: stat(replicas.admin, "cluster.replicas.membership_healthy") == 1, what="the dead replica out")


def stat(admin: str, name: str) -> int:
    text = httpx.get(f"{admin}/stats", params={"filter": f"^{name}$"}, timeout=10).text
    values: Any = [line.split(": ")[1] for line in text.splitlines() if line.startswith(name + ": ")]
    return int(values[0]) if values else -1
