"""LLM-in-SQL: `LLM()` functions for DuckDB (embedded) and Spark, with a prefix-aware planner.

Liu et al., "Optimizing LLM Queries in Relational Workloads" (SPEC §3.4): exact dedup,
column reordering (ASL·N/C), GGR (greedy group recursion), row sorting, predicate
ordering, instruction-first prompt layout. `connect()` is the Python entry point.
"""

from __future__ import annotations

from typing import Any


def connect(*args: Any, **kwargs: Any) -> Any:
    """`flowserve.sql.connect(cluster=... | gateway=URL, optimize="all")` → `Connection`."""
    from flowserve.sql.connection import connect as _connect
    return _connect(*args, **kwargs)


__all__ = ["connect"]
