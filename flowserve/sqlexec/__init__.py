"""The SQL sandbox every database tool runs through: read-only, time- and size-limited
SQLite and DuckDB execution, with JSON-safe results — in this process (`run_query`, for
trusted SQL) or in warm worker processes under OS limits (`WorkerPool`, for untrusted SQL)."""

from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused
from flowserve.sqlexec.pool import WorkerPool
from flowserve.sqlexec.run import database_kind, run_query

__all__ = ["SQLError", "SQLRefused", "SandboxLimits", "WorkerPool", "database_kind", "run_query"]
