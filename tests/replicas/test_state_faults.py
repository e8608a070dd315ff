"""The shared state failing: Redis stopped and restarted empty (replicas serve on, degraded,
and re-sync without losing or doubling a call), and Redis holding what flowserve did not
write (refused, logged, counted; the replica keeps serving). Tenants' service crosses
replicas into the VTC counters."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
import redis
from live_support import MODEL, poll_until

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.replicas.redis_server import PrivateRedis

KEY = "sk-faults"
AUTH = {"authorization": f"Bearer {KEY}"}
OPERATOR = {KEY: {"tenant": "default", "acts_for": ["*"]}}  # x-tenant names any tenant


def config(url: str, namespace: str) -> ServeConfig:
    return serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}], "api_keys": OPERATOR,
        "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve",
                    "queue_params": {"tenant_weights": {"gold": 2, "free": 1}},
                    "state": {"url": url, "namespace": namespace, "sync_ms": 10, "heartbeat_s": 0.3,
                              "timeout_ms": 1000}},
    }, "test")


def call(server: BackgroundServer, program: str | None, prompt: str, **headers: str) -> httpx.Response:
    h = {**AUTH, **headers, **({"x-flowserve-program": program} if program else {})}
    return httpx.post(f"{server.url}/v1/completions", headers=h,
                      json={"model": MODEL, "prompt": prompt, "max_tokens": 3}, timeout=30)


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def own_redis() -> Iterator[PrivateRedis]:
    with PrivateRedis() as server:
        yield server


@pytest.fixture
def replicas(own_redis: PrivateRedis, namespace: str) -> Iterator[tuple[BackgroundServer, BackgroundServer]]:
    cfg = config(own_redis.url, namespace)
    with ExitStack() as stack:
        a = stack.enter_context(BackgroundServer(create_app(cfg)))
        b = stack.enter_context(BackgroundServer(create_app(cfg)))
        poll_until(lambda: httpx.get(f"{b.url}/health").json()["state"]["peers"] == 1, 10, "peers")
        yield a, b


def test_redis_lost_then_restarted_empty_loses_and_doubles_nothing(
        own_redis: PrivateRedis, replicas: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = replicas
    tokens = 0
    for i in range(3):
        r = call((a, b)[i % 2], "p", f"before {i}")
        assert r.status_code == 200
        tokens += r.json()["usage"]["prompt_tokens"]
    own_redis.stop()
    for i in range(4):  # both replicas keep serving, programs included
        r = call((a, b)[i % 2], "p", f"while lost {i}")
        assert r.status_code == 200, r.text
        tokens += r.json()["usage"]["prompt_tokens"]
    assert call(b, "new-while-lost", "opened without Redis").status_code == 200
    for s in (a, b):
        health = httpx.get(f"{s.url}/health")
        assert health.status_code == 200 and health.json()["state"]["degraded"] is True
        assert metric(s.url, "flowserve_state_degraded") == 1.0
    own_redis.start()  # empty: no persistence
    for s in (a, b):
        poll_until(lambda s=s: not httpx.get(f"{s.url}/health").json()["state"]["degraded"], 10, "re-synced")
    state = httpx.get(f"{a.url}/v1/programs/p", headers=AUTH).json()
    assert state["calls"] == 7 and len(state["replicas"]) == 2
    summary = httpx.delete(f"{b.url}/v1/programs/p", headers=AUTH).json()
    assert summary["calls"] == 7 and summary["prompt_tokens"] == tokens and summary["output_tokens"] == 21
    assert httpx.get(f"{a.url}/v1/programs/new-while-lost", headers=AUTH).json()["calls"] == 1
    assert call(a, None, "still one of two").status_code == 200
    names = {httpx.get(f"{s.url}/health").json()["state"]["replica"].split("-")[0] for s in (a, b)}
    assert names == {"r1", "r2"}  # replica numbers kept after Redis forgot them


def test_foreign_contents_are_refused_and_serving_goes_on(
        own_redis: PrivateRedis, namespace: str, replicas: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, _ = replicas
    r = redis.Redis.from_url(own_redis.url)
    r.set(f"{namespace}:report:evil", b"not a report")
    r.sadd(f"{namespace}:replicas", "evil")
    r.set(f"{namespace}:program:1.x:wrongtype", b"a string, not a hash")  # tenant x's program ids
    r.hset(f"{namespace}:program:1.x:badfields", mapping={"tenant": "x", "ended": "", "opened": "yesterday"})
    r.set(f"{namespace}:query:q-77", b"[1, 2]")
    poll_until(lambda: metric(a.url, 'flowserve_state_refused_total{kind="report"}') > 0, 10, "refused report")
    assert httpx.get(f"{a.url}/health").json()["state"]["peers"] == 1  # the evil entry is no peer
    for pid in ("wrongtype", "badfields"):
        bad = call(a, pid, "hello", **{"x-tenant": "x"})
        assert bad.status_code == 409 and bad.json()["error"]["code"] == "program_state_refused", bad.text
    assert httpx.get(f"{a.url}/v1/queries/q-77", headers=AUTH).status_code == 404
    r.delete(f"{namespace}:routes")
    r.set(f"{namespace}:routes", b"not a stream")
    assert call(a, "fine", "the rest is served").status_code == 200
    poll_until(lambda: metric(a.url, 'flowserve_state_refused_total{kind="routes"}') > 0, 10, "refused stream")
    assert call(a, None, "still serving").status_code == 200
    r.close()


def test_tenants_service_at_one_replica_counts_at_the_other(replicas: tuple[BackgroundServer, BackgroundServer]
                                                            ) -> None:
    a, b = replicas
    for i in range(5):
        assert call(a, None, f"gold work {i}", **{"x-tenant": "gold"}).status_code == 200
    served_at_a = a.app.state.gateway.driver.core.tenant_costs()["gold"]
    ledger_b = b.app.state.gateway.driver.core._calls.tenants  # the VTC counters b's queue policy reads
    poll_until(lambda: ledger_b.counter("gold") >= served_at_a / 2, 10, "a's service in b's counter")
    assert ledger_b.counter("gold") == pytest.approx(served_at_a / 2)  # weight 2
    assert "gold" not in b.app.state.gateway.driver.core.tenant_costs()  # b shares only its own service onwards


def test_a_foreign_epoch_loses_no_program_summary(
        own_redis: PrivateRedis, namespace: str, replicas: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = replicas
    r = redis.Redis.from_url(own_redis.url)
    for pid, foreign in (("p-string", lambda k: r.set(k, b"not a counter")),
                         ("p-hash", lambda k: r.hset(k, mapping={"a": "b"}))):
        for i in range(3):
            assert call((a, b)[i % 2], pid, f"{pid} step {i}").status_code == 200
        r.delete(f"{namespace}:epoch")
        foreign(f"{namespace}:epoch")
        summary = httpx.delete(f"{b.url}/v1/programs/{pid}", headers=AUTH, timeout=30)
        assert summary.status_code == 200, summary.text
        assert summary.json()["status"] == "ended" and summary.json()["calls"] == 3
        assert httpx.get(f"{a.url}/v1/programs/{pid}", headers=AUTH).json()["calls"] == 3
    assert metric(b.url, 'flowserve_state_refused_total{kind="epoch"}') >= 2
    assert r.hgetall(f"{namespace}:epoch") == {b"a": b"b"}  # refused, never overwritten
    r.close()


def test_a_foreign_replica_counter_is_refused_and_the_replica_serves(
        own_redis: PrivateRedis, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    r = redis.Redis.from_url(own_redis.url)
    r.set(f"{namespace}:seq", b"someone else's")
    with caplog.at_level("ERROR", logger="flowserve.replicas"), \
            BackgroundServer(create_app(config(own_redis.url, namespace))) as s:
        health = httpx.get(f"{s.url}/health").json()
        number = int(health["state"]["replica"].split("-")[0].removeprefix("r"))
        assert number >= 1 << 24  # its own random number, above any count
        assert metric(s.url, 'flowserve_state_refused_total{kind="seq"}') == 1
        assert call(s, "p", "served").status_code == 200
    refused = [rec.getMessage() for rec in caplog.records if "shared state refused" in rec.getMessage()]
    assert len(refused) == 1 and f"{namespace}:seq" in refused[0], refused
    assert not [rec for rec in caplog.records if rec.exc_info and rec.name.startswith("flowserve")]  # no traceback
    assert r.get(f"{namespace}:seq") == b"someone else's"
    r.close()
