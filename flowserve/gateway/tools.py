"""Tool executors: what the live driver runs for a `RunOp` (the core only names the op).

* `tokenize` — text to the model's token ids (engine `/tokenize` or the word tokenizer);
* `sql` — one read-only statement on a SQLite file, in a worker thread, with a time
  limit; the database's error message comes back as the op's error. An op without `sql`
  arguments is a replayed trace's execution step: it takes its recorded duration;
* `sleep` — wait the recorded duration (replayed workloads).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from flowserve.types import ToolOp

Tokenize = Callable[[str, str | None], Awaitable[list[int]]]
MAX_ROWS = 20


class ToolError(Exception):
    """The tool ran and reports an error (the workflow decides what to do with it)."""


def run_sql(path: str, sql: str, time_limit_s: float, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """Execute one statement read-only; raises ToolError with SQLite's message."""
    deadline = time.monotonic() + time_limit_s
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error as e:
        raise ToolError(f"cannot open database: {e}") from None
    try:
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cur = con.execute(sql)
        rows = cur.fetchmany(max_rows + 1)
        columns = [d[0] for d in cur.description or ()]
    except sqlite3.Warning as e:
        raise ToolError(str(e)) from None
    except sqlite3.Error as e:
        msg = str(e)
        if msg == "interrupted":
            msg = f"query exceeded the time limit of {time_limit_s:g} s"
        raise ToolError(msg) from None
    finally:
        con.close()
    return {"columns": columns, "rows": [list(r) for r in rows[:max_rows]],
            "truncated": len(rows) > max_rows}


class ToolRunner:
    def __init__(self, tokenize: Tokenize, time_scale: float = 1.0, sql_time_limit_s: float = 5.0) -> None:
        self._tokenize = tokenize
        self._scale = time_scale
        self._sql_limit = sql_time_limit_s

    async def run(self, op: ToolOp) -> Any:
        """The op's result; raises ToolError for an error the workflow should see."""
        args = op.args
        if op.op == "tokenize":
            return await self._tokenize(str(args["text"]), args.get("model"))
        if op.op == "sql" and "sql" in args:
            return await asyncio.to_thread(run_sql, str(args["database"]), str(args["sql"]), self._sql_limit)
        if op.op in ("sql", "sleep"):
            await asyncio.sleep(op.sim_duration / self._scale)
            if op.sim_error:
                raise ToolError("sql error (replayed)")
            return None
        raise ToolError(f"no executor for tool op {op.op!r}")
