"""One entry point for every database tool: which engine a file is, and running a
statement on it in the sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from flowserve.sqlexec.duck import run_duckdb
from flowserve.sqlexec.limits import SandboxLimits, SQLError
from flowserve.sqlexec.sqlite import run_sqlite

Kind = Literal["sqlite", "duckdb"]
DEFAULT_LIMITS = SandboxLimits()


def database_kind(path: str | Path) -> Kind:
    """From the file's header (SQLite's magic string, DuckDB's `DUCK` at byte 8); raises
    SQLError for a missing or unreadable file or one that is neither."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise SQLError(f"cannot read database {str(path)!r}: {e.strerror}") from None
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if head[8:12] == b"DUCK":
        return "duckdb"
    raise SQLError(f"{str(path)!r} is neither a SQLite nor a DuckDB database")


def check_sql(sql: object) -> None:
    if not isinstance(sql, str) or not sql.strip():
        raise SQLError("no SQL to run")


def run_query(path: str | Path, sql: str, limits: SandboxLimits = DEFAULT_LIMITS,
              kind: Kind | None = None, on_open: Callable[[], None] | None = None) -> dict[str, Any]:
    """Execute one read-only statement: `{columns, rows, truncated}` (JSON-safe), or
    SQLError (SQLRefused when the sandbox refused it) with the reason. In this process:
    for trusted SQL only; untrusted SQL goes through a `WorkerPool`. `on_open` runs once
    the database is open, before the statement (a worker sets its OS limits there)."""
    check_sql(sql)
    kind = kind or database_kind(path)
    return (run_sqlite if kind == "sqlite" else run_duckdb)(str(path), sql, limits, on_open)
