"""What the sandbox allows: its limits and the errors it reports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class SQLError(Exception):
    """The statement failed (the database's own message, or a limit it hit)."""


class SQLRefused(SQLError):
    """The sandbox refused the statement before or while running it; names what was refused."""


@dataclass(frozen=True)
class SandboxLimits:
    time_limit_s: float = 5.0
    max_rows: int = 20  # rows returned (the rest is counted as truncated)
    max_result_bytes: int = 256 * 1024  # JSON size of the returned rows
    max_value_bytes: int = 1_000_000  # SQLITE_LIMIT_LENGTH: no string or blob larger than this
    memory_limit: str = "256MB"  # DuckDB
    threads: int = 1  # DuckDB
    # in a worker process (`WorkerPool`): address space a query may map beyond the
    # worker's idle size (RLIMIT_AS), which also bounds what DuckDB allocates outside
    # its buffer manager
    worker_memory_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        assert self.time_limit_s > 0 and self.max_rows >= 0, self
        assert self.max_result_bytes > 0 and self.max_value_bytes > 0 and self.threads >= 1, self
        assert self.worker_memory_bytes > 0, self

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
