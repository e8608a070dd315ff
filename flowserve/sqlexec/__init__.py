"""The SQL sandbox every database tool runs through: read-only, time- and size-limited
SQLite and DuckDB execution (`run_query`), with JSON-safe results."""

from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused
from flowserve.sqlexec.run import database_kind, run_query

__all__ = ["SQLError", "SQLRefused", "SandboxLimits", "database_kind", "run_query"]
