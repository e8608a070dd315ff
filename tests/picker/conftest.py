"""The Envoy tests' shared engines (the processes: `envoy_fronts`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_engine import HttpEngine


@pytest.fixture(scope="module")
def two_engines() -> Iterator[list[HttpEngine]]:
    with HttpEngine("e0") as a, HttpEngine("e1") as b:
        yield [a, b]
