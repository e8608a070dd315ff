"""The `flowserve` command line. Bad input exits 2 with one line naming the problem.

Commands live in one module per area (`simulate`, `bench`, `serving`); importing them
registers them on `app`.
"""

from __future__ import annotations

from typing import Any

from flowserve.cli import (  # noqa: F401  (register the commands)
    bench,
    bench_dispatch,
    bench_replicas,
    bench_slo,
    graph,
    serving,
    simulate,
    sql,
    text2sql,
    tune,
)
from flowserve.cli.common import app


def main(argv: list[str] | None = None) -> Any:
    return app(argv)


__all__ = ["app", "main"]
