"""Two gateways in one process sharing one real Redis: a program's calls spread over both
form one program with one exact summary; GET answers the same on each; limits hold
across them; queries answer on either; a replica with another config is refused by name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
import redis
from live_support import MODEL, poll_until, run

from flowserve.errors import ConfigError
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.replica import check_state
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.replicas.redis_server import PrivateRedis

KEY = "sk-replicas"
AUTH = {"authorization": f"Bearer {KEY}"}
OPERATOR = {KEY: {"tenant": "default", "acts_for": ["*"]}}  # x-tenant names any tenant


def config(url: str, namespace: str, **gateway: object) -> ServeConfig:
    return serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
        "api_keys": OPERATOR,
        "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve",
                    "state": {"url": url, "namespace": namespace, "sync_ms": 10, "heartbeat_s": 0.5}, **gateway},
    }, "test")


@pytest.fixture
def pair(redis_server: PrivateRedis, namespace: str) -> Iterator[tuple[BackgroundServer, BackgroundServer]]:
    cfg = config(redis_server.url, namespace, programs={"max_calls": 7, "max_open_per_tenant": 2, "idle_s": 30})
    with ExitStack() as stack:
        a = stack.enter_context(BackgroundServer(create_app(cfg)))
        b = stack.enter_context(BackgroundServer(create_app(cfg)))
        yield a, b


def call(server: BackgroundServer, program: str, prompt: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/completions", headers={**AUTH, "x-flowserve-program": program, **headers},
                      json={"model": MODEL, "prompt": prompt, "max_tokens": 3}, timeout=30)


def test_a_program_split_across_two_replicas_is_one_program(pair: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = pair
    context = "You are an agent with tools. " * 30
    answers = []
    for i in range(6):
        r = call((a, b)[i % 2], "split", context + f"step {i}", **{"x-slo-ms": "60000"})
        assert r.status_code == 200, r.text
        answers.append(r.json()["usage"])
        states = [httpx.get(f"{s.url}/v1/programs/split", headers=AUTH).json() for s in (a, b)]
        assert [s["calls"] for s in states] == [i + 1, i + 1]  # each replica counts every call, at once
    assert len(states[0]["replicas"]) == 2 and states[0]["slo_ms"] == 60000
    summary = httpx.delete(f"{b.url}/v1/programs/split", headers=AUTH).json()
    assert summary["status"] == "ended" and summary["ended"] == "deleted"
    assert summary["calls"] == 6 and summary["failed_calls"] == 0 and summary["lost_calls"] == 0
    assert summary["prompt_tokens"] == sum(u["prompt_tokens"] for u in answers)
    assert summary["output_tokens"] == sum(u["completion_tokens"] for u in answers) == 18
    assert summary["cached_tokens"] == sum(u["prompt_tokens_details"]["cached_tokens"] for u in answers)
    assert summary["deadline_met"] is True
    assert httpx.get(f"{a.url}/v1/programs/split", headers=AUTH).json() == summary  # the same on the other
    late = call(a, "split", "one more")
    assert late.status_code == 409 and late.json()["error"]["code"] == "program_ended"


def test_limits_hold_across_replicas(pair: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = pair
    for i in range(7):  # programs.max_calls is 7 over both replicas
        assert call((a, b)[i % 2], "limited", f"call {i}").status_code == 200
    r = call(a, "limited", "the eighth")
    assert r.status_code == 429 and "max_calls" in r.json()["error"]["message"]
    r = call(b, "limited", "the eighth, elsewhere", **{"x-slo-ms": "5"})
    assert r.status_code == 400 and "set by its first call" in r.json()["error"]["message"]
    t = {"x-tenant": "t3"}
    assert call(a, "t3-one", "x", **t).status_code == 200  # programs.max_open_per_tenant is 2
    assert call(b, "t3-two", "x", **t).status_code == 200
    r = call(a, "t3-three", "x", **t)
    assert r.status_code == 429 and "max_open_per_tenant" in r.json()["error"]["message"]
    t4 = {"x-tenant": "t4"}  # program ids are the tenant's own: t4's "t3-one" is another program
    assert call(b, "t3-one", "another tenant's program", **t4).status_code == 200
    for tenant in (t, t4):
        assert httpx.get(f"{a.url}/v1/programs/t3-one", headers={**AUTH, **tenant}).json()["calls"] == 1
    assert httpx.delete(f"{b.url}/v1/programs/t3-one", headers={**AUTH, **t}).status_code == 200
    assert call(a, "t3-three", "room again", **t).status_code == 200


def test_a_query_answers_on_every_replica(pair: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = pair
    r = httpx.post(f"{a.url}/v1/completions", headers=AUTH, json={"model": MODEL, "prompt": "hello", "max_tokens": 2})
    qid = r.headers["x-flowserve-query-id"]
    other = httpx.post(f"{b.url}/v1/completions", headers=AUTH,
                       json={"model": MODEL, "prompt": "hello", "max_tokens": 2})
    assert other.headers["x-flowserve-query-id"] != qid  # ids are unique across replicas
    mine = httpx.get(f"{a.url}/v1/queries/{qid}", headers=AUTH).json()
    theirs = poll_until(lambda: (g := httpx.get(f"{b.url}/v1/queries/{qid}", headers=AUTH)).status_code == 200 and g,
                        10, "the query's answer at the other replica")
    assert theirs.json() == mine and mine["status"] == "completed"
    stranger = httpx.get(f"{b.url}/v1/queries/{qid}", headers={**AUTH, "x-tenant": "stranger"})
    assert stranger.status_code == 404  # another tenant's query, at any replica
    health = httpx.get(f"{b.url}/health").json()
    assert health["state"]["peers"] == 1 and health["state"]["degraded"] is False


def test_a_prompt_one_replica_routed_joins_the_others_prefix_index(
        pair: tuple[BackgroundServer, BackgroundServer]) -> None:
    a, b = pair
    prompt = list(range(1000, 1600))
    r = httpx.post(f"{a.url}/v1/completions", headers=AUTH, json={"model": MODEL, "prompt": prompt, "max_tokens": 2})
    instance = r.headers["x-flowserve-instance"]
    core_b = b.app.state.gateway.driver.core
    hit = poll_until(lambda: core_b.prefix_hit(tuple(prompt), instance), 10, "a's routed prompt in b's index")
    assert hit == len(prompt)  # every block rebuilt from the stream
    assert core_b.prefix_hit(tuple(prompt), next(i for i in ("sim-0", "sim-1") if i != instance)) == 0


def test_without_redis_server_workers_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowserve.host import replica

    monkeypatch.setattr(replica, "redis_binary", lambda: None)
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}]}, "test")
    with pytest.raises(ConfigError, match=r"--workers 2: .*redis-server is not on PATH"), replica.replicated(cfg, 2):
        pass


def test_a_replica_with_another_config_is_refused_by_name(redis_server: PrivateRedis, namespace: str) -> None:
    cfg = config(redis_server.url, namespace)
    with BackgroundServer(create_app(cfg)):
        other = config(redis_server.url, namespace, dispatch="round_robin")
        with pytest.raises(ConfigError, match=r"dispatch \"round_robin\" here, \"flowserve\" there"):
            run(check_state(other.gateway.state, other.instances, other.gateway))
        bigger = serve_config({**_raw(redis_server.url, namespace), "instances": [
            {"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 3}]}, "test")
        with pytest.raises(ConfigError, match="instance 'sim-2' only here"):
            run(check_state(bigger.gateway.state, bigger.instances, bigger.gateway))
        run(check_state(cfg.gateway.state, cfg.instances, cfg.gateway))  # the same config joins


def test_a_foreign_config_in_the_state_is_refused(redis_server: PrivateRedis, namespace: str) -> None:
    r = redis.Redis.from_url(redis_server.url)
    r.set(f"{namespace}:config", b"somebody else's")
    cfg = config(redis_server.url, namespace)
    with pytest.raises(ConfigError, match="no readable config"):
        run(check_state(cfg.gateway.state, cfg.instances, cfg.gateway))
    r.close()


def test_an_unreachable_state_url_is_one_clear_error(tmp_path) -> None:
    cfg = config(f"unix://{tmp_path}/none.sock?db=0", "x")
    with pytest.raises(ConfigError, match="Redis does not answer"):
        run(check_state(cfg.gateway.state, cfg.instances, cfg.gateway))
    with pytest.raises(ConfigError, match="expected redis://"):
        bad = config("http://127.0.0.1:1/0", "x")
        run(check_state(bad.gateway.state, bad.instances, bad.gateway))


def _raw(url: str, namespace: str) -> dict:
    return {"api_keys": OPERATOR, "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve",
                                           "state": {"url": url, "namespace": namespace}}}


def test_admin_instance_changes_reach_every_replica_and_one_that_joins_later(redis_server: PrivateRedis,
                                                                            namespace: str) -> None:
    """Issue 44 item 10: POST/DELETE /admin/instances on one replica left the others on the
    old set. The change goes through the state: each replica applies it, a later one starts
    with it."""
    admin = {"authorization": "Bearer sk-admin"}
    cfg = config(redis_server.url, namespace, admin_keys=["sk-admin"])

    def names(s: BackgroundServer) -> set[str]:
        return {i["name"] for i in httpx.get(f"{s.url}/admin/instances", headers=admin).json()["instances"]}

    with ExitStack() as stack:
        a = stack.enter_context(BackgroundServer(create_app(cfg)))
        b = stack.enter_context(BackgroundServer(create_app(cfg)))
        base = names(a)
        assert names(b) == base and len(base) == 2
        added = httpx.post(f"{a.url}/admin/instances", headers=admin,
                           json={"name": "extra", "gpu": "A100-80G", "model": MODEL})
        assert added.status_code == 201, added.text
        poll_until(lambda: "extra" in names(b), 10, "the added instance at the other replica")
        gone = sorted(base)[0]
        assert httpx.delete(f"{b.url}/admin/instances/{gone}", headers=admin).status_code == 200
        poll_until(lambda: gone not in names(a), 10, "the removed instance gone at the other replica")
        want = (base - {gone}) | {"extra"}
        assert names(a) == names(b) == want
        c = stack.enter_context(BackgroundServer(create_app(cfg)))
        assert names(c) == want  # from its start, before any heartbeat
        r = httpx.post(f"{c.url}/v1/completions", headers=AUTH, json={"model": MODEL, "prompt": "hi", "max_tokens": 2})
        assert r.status_code == 200 and r.headers["x-flowserve-instance"] in want
        missing = httpx.delete(f"{c.url}/admin/instances/{gone}", headers=admin)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "instance_not_found"
