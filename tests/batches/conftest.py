"""The stores under test, behind one fixture: SQLite in a fresh folder, and Redis (a
private redis-server per module, a fresh namespace per test)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowserve.batches.redis_store import SharedBatches
from flowserve.batches.sqlite_store import SqliteBatches
from flowserve.batches.store import BatchStore
from flowserve.replicas.redis_server import PrivateRedis, redis_binary
from flowserve.replicas.store import StateStore, connect

_namespaces = itertools.count(1)


@dataclass
class Joined:
    """A replica that joined its state, as SharedBatches reads it."""

    store: StateStore


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    assert redis_binary() is not None, "redis-server is not installed: .ci/run installs Debian's redis-server"
    with PrivateRedis() as server:
        yield server


OpenStore = Callable[[], Awaitable[tuple[BatchStore, Callable[[], Awaitable[None]]]]]


@pytest.fixture(params=["sqlite", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """Opens the store inside the test's event loop: (store, how to close it)."""
    if request.param == "sqlite":
        async def sqlite() -> tuple[BatchStore, Callable[[], Awaitable[None]]]:
            store = SqliteBatches(tmp_path)
            return store, store.aclose
        return sqlite
    server: PrivateRedis = request.getfixturevalue("redis_server")
    ns = f"b{next(_namespaces)}"

    async def shared() -> tuple[BatchStore, Callable[[], Awaitable[None]]]:
        state = StateStore(connect(server.url, 2.0), ns)
        return SharedBatches(Joined(state)), state.aclose
    return shared
