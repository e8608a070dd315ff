"""Where the Batch API's state lives: the store the composition root chooses
(`flowserve.host.root`) — an SQLite database for one process (`SqliteBatches`), or the
replicas' Redis (`SharedBatches`) — and the folder that holds the files' bytes
(`FileFolder`), one for a process or shared by every replica.

A line's result is recorded before it is counted, both in one step of the store: a
result recorded twice (a line re-run after a crash that hid its first answer) keeps the
first and counts once, so the counts are the number of lines with a result.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from flowserve.batches.records import BatchRecord, BatchStatus, FileRecord, LineResult, RequestCounts
from flowserve.errors import ConfigError


class BatchStore(Protocol):
    async def add_file(self, rec: FileRecord) -> None: ...

    async def file(self, file_id: str) -> FileRecord | None: ...

    async def files(self, tenant: str) -> list[FileRecord]:
        """The tenant's files, newest first."""
        ...

    async def add_batch(self, rec: BatchRecord, max_open: int) -> bool:
        """Add a batch unless its tenant has `max_open` open ones already (False)."""
        ...

    async def batch(self, batch_id: str) -> BatchRecord | None: ...

    async def batches(self, tenant: str) -> list[BatchRecord]:
        """The tenant's batches, newest first."""
        ...

    async def move(self, batch_id: str, to: BatchStatus, now: int, total: int | None = None,
                   **fields: Any) -> BatchRecord:
        """Move a batch from its stored status to `to` (`BatchRecord.moved`: BadTransition if
        it cannot), in one step however many processes move it; `total`: its lines, counted
        when it starts; `fields`: the record's other fields that change (its files when it
        ends, its errors when it fails)."""
        ...

    async def record(self, batch_id: str, results: Sequence[LineResult]) -> RequestCounts:
        """Record lines' results and count the new ones, in one step; the counts after."""
        ...

    async def recorded(self, batch_id: str) -> set[int]:
        """The line numbers that have a result."""
        ...

    async def results(self, batch_id: str) -> list[LineResult]:
        """Every result, in line order."""
        ...

    async def claim(self, owner: str, lease_s: float) -> list[BatchRecord]:
        """The open batches `owner` is to run now: those it holds, plus those nobody holds
        (their leases, `lease_s` long, renewed by calling again)."""
        ...

    async def release(self, owner: str, batch_id: str) -> None:
        """`owner` stops running a batch (it ended, or the process stops)."""
        ...

    async def aclose(self) -> None: ...


class FileFolder:
    """The files' bytes, one file per id; a file appears whole or not at all."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root) / "files"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"gateway.batches.dir {str(root)!r}: cannot use it ({e.strerror})") from None

    def path(self, file_id: str) -> Path:
        return self.root / f"{file_id}.jsonl"

    def write(self, file_id: str, data: bytes) -> None:
        """Durably: written aside, flushed to disk, then renamed into place."""
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(file_id))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def read(self, file_id: str) -> bytes:
        return self.path(file_id).read_bytes()
