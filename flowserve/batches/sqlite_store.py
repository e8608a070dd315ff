"""The Batch API's state for one process: an SQLite database in `gateway.batches.dir`
(`batches.sqlite`, the standard library's sqlite3, no server).

Every statement runs on one thread of its own, so the event loop never waits on a
write that syncs to disk. The database is in WAL mode with `synchronous=NORMAL`: a
committed result survives the process being killed (`kill -9`); a power cut may lose
the last commits, whose lines then run again — never counted twice, since a line's
count is its result's row. One process owns the folder: a second one that opens it is
refused (an exclusive lock, released by the system when the owner dies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import orjson

from flowserve.batches.records import OPEN, BatchRecord, BatchStatus, FileRecord, LineResult, RequestCounts
from flowserve.errors import ConfigError

T = TypeVar("T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at INTEGER NOT NULL,
                                  doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS files_tenant ON files (tenant, created_at);
CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_at INTEGER NOT NULL,
                                    status TEXT NOT NULL, doc TEXT NOT NULL, total INTEGER NOT NULL DEFAULT 0,
                                    completed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS batches_tenant ON batches (tenant, created_at);
CREATE TABLE IF NOT EXISTS results (batch_id TEXT NOT NULL, line INTEGER NOT NULL, ok INTEGER NOT NULL,
                                    doc TEXT NOT NULL, PRIMARY KEY (batch_id, line)) WITHOUT ROWID;
"""
_OPEN = tuple(s.value for s in OPEN)


def _batch(row: sqlite3.Row) -> BatchRecord:
    return BatchRecord.from_doc(orjson.loads(row["doc"]), RequestCounts(row["total"], row["completed"],
                                                                       row["failed"]))


class _NamedRows(sqlite3.Connection):
    """A connection whose rows are read by column name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.row_factory = sqlite3.Row


class SqliteBatches:
    def __init__(self, folder: str | Path) -> None:
        root = Path(folder)
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(root / "batches.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise ConfigError(f"gateway.batches.dir {str(root)!r}: cannot use it ({e.strerror})") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            raise ConfigError(f"gateway.batches.dir {str(root)!r}: another flowserve process uses it; processes "
                              f"that serve one Batch API are replicas (gateway.state)") from None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="batches-sqlite")
        self._db = self._pool.submit(self._connect, root / "batches.sqlite").result()

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        # used by the pool's one thread
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, factory=_NamedRows)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        return db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, self._db)

    async def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one transaction (rolled back if it raises)."""
        def run(db: sqlite3.Connection) -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return out
        return await self._run(run)

    # ------------------------------------------------------------------ files

    async def add_file(self, rec: FileRecord) -> None:
        doc = orjson.dumps(dataclasses.asdict(rec)).decode()
        await self._run(lambda db: db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)",
                                              (rec.id, rec.tenant, rec.created_at, doc)))

    async def file(self, file_id: str) -> FileRecord | None:
        row = await self._run(lambda db: db.execute("SELECT doc FROM files WHERE id = ?", (file_id,)).fetchone())
        return None if row is None else FileRecord(**orjson.loads(row["doc"]))

    async def files(self, tenant: str) -> list[FileRecord]:
        rows = await self._run(lambda db: db.execute(
            "SELECT doc FROM files WHERE tenant = ? ORDER BY created_at DESC, id", (tenant,)).fetchall())
        return [FileRecord(**orjson.loads(r["doc"])) for r in rows]

    # ------------------------------------------------------------------ batches

    async def add_batch(self, rec: BatchRecord, max_open: int) -> bool:
        doc = orjson.dumps(rec.to_doc()).decode()

        def add(db: sqlite3.Connection) -> bool:
            (n,) = db.execute(f"SELECT COUNT(*) FROM batches WHERE tenant = ? AND status IN "
                              f"({','.join('?' * len(_OPEN))})", (rec.tenant, *_OPEN)).fetchone()
            if n >= max_open:
                return False
            db.execute("INSERT INTO batches (id, tenant, created_at, status, doc) VALUES (?, ?, ?, ?, ?)",
                       (rec.id, rec.tenant, rec.created_at, rec.status.value, doc))
            return True
        return await self._tx(add)

    async def batch(self, batch_id: str) -> BatchRecord | None:
        row = await self._run(lambda db: db.execute("SELECT * FROM batches WHERE id = ?", (batch_id,)).fetchone())
        return None if row is None else _batch(row)

    async def batches(self, tenant: str) -> list[BatchRecord]:
        rows = await self._run(lambda db: db.execute(
            "SELECT * FROM batches WHERE tenant = ? ORDER BY created_at DESC, id", (tenant,)).fetchall())
        return [_batch(r) for r in rows]

    async def move(self, batch_id: str, to: BatchStatus, now: int, total: int | None = None,
                   **fields: Any) -> BatchRecord:
        def move(db: sqlite3.Connection) -> BatchRecord:
            row = db.execute("SELECT * FROM batches WHERE id = ?", (batch_id,)).fetchone()
            if row is None:
                raise KeyError(batch_id)
            rec = _batch(row).moved(to, now, **fields)
            db.execute("UPDATE batches SET status = ?, doc = ?, total = COALESCE(?, total) WHERE id = ?",
                       (to.value, orjson.dumps(rec.to_doc()).decode(), total, batch_id))
            return _batch(db.execute("SELECT * FROM batches WHERE id = ?", (batch_id,)).fetchone())
        return await self._tx(move)

    # ------------------------------------------------------------------ results

    async def record(self, batch_id: str, results: Sequence[LineResult]) -> RequestCounts:
        rows = [(batch_id, r.line, int(r.ok), orjson.dumps(r.to_doc()).decode()) for r in results]

        def record(db: sqlite3.Connection) -> RequestCounts:
            ok = failed = 0
            for row in rows:
                if db.execute("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?)", row).rowcount:
                    ok += row[2]
                    failed += 1 - row[2]
            db.execute("UPDATE batches SET completed = completed + ?, failed = failed + ? WHERE id = ?",
                       (ok, failed, batch_id))
            got = db.execute("SELECT total, completed, failed FROM batches WHERE id = ?", (batch_id,)).fetchone()
            return RequestCounts(*got) if got is not None else RequestCounts()
        return await self._tx(record)

    async def recorded(self, batch_id: str) -> set[int]:
        rows = await self._run(lambda db: db.execute("SELECT line FROM results WHERE batch_id = ?",
                                                     (batch_id,)).fetchall())
        return {r["line"] for r in rows}

    async def results(self, batch_id: str) -> list[LineResult]:
        rows = await self._run(lambda db: db.execute("SELECT doc FROM results WHERE batch_id = ? ORDER BY line",
                                                     (batch_id,)).fetchall())
        return [LineResult.from_doc(orjson.loads(r["doc"])) for r in rows]

    # ------------------------------------------------------------------ running

    async def claim(self, owner: str, lease_s: float) -> list[BatchRecord]:
        """This process owns the folder: every open batch is its to run."""
        rows = await self._run(lambda db: db.execute(
            f"SELECT * FROM batches WHERE status IN ({','.join('?' * len(_OPEN))}) ORDER BY created_at, id",
            _OPEN).fetchall())
        return [_batch(r) for r in rows]

    async def release(self, owner: str, batch_id: str) -> None:
        return None

    async def aclose(self) -> None:
        await self._run(lambda db: db.close())
        self._pool.shutdown()
        os.close(self._lock)
