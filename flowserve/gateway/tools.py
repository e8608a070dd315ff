"""Tool executors: what the live driver runs for a `RunOp` (the core only names the op).

* `sql` — one read-only statement on a SQLite file, in a worker thread, with a time
  limit; the database's error message comes back as the op's error;
* `part` — item `index` of a splittable output (a line of an LLM's text, an item of a
  list) when it was not streamed;
* the retrieval ops (`flowserve.retrieval.executors`: chunk, embed, vector ingest and
  search, rerank, web search, aggregate) on the real offline components, given the
  instance the core bound a batch to;
* a replayed workload's tool steps (any op the query's oracle knows): wait the recorded
  duration (scaled like simulated engines) and report the recorded error.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from flowserve.graph.oracle import ToolOutcome
from flowserve.graph.primitives import PART, split_parts
from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.executors import Executor
from flowserve.types import InstanceSpec, OpFinished, ToolOp

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


log = logging.getLogger("flowserve.gateway")


def part_of(source: Any, index: int) -> Any:
    """Item `index` of a splittable output: a line of text, an item of a list."""
    items = split_parts(source) if isinstance(source, str) else source
    if not isinstance(items, list | tuple):
        raise ToolError(f"part: cannot split a {type(source).__name__}")
    if not 0 <= index < len(items):
        raise ToolError(f"part: the output has {len(items)} part(s); part {index} is missing")
    return items[index]


class ToolRunner:
    def __init__(self, time_scale: float = 1.0, sql_time_limit_s: float = 5.0,
                 executors: Mapping[str, Executor] | None = None) -> None:
        self._scale = time_scale
        self._sql_limit = sql_time_limit_s
        self._executors = dict(executors or {})

    async def run(self, op: ToolOp, replayed: ToolOutcome | None = None, instance: InstanceSpec | None = None) -> Any:
        """The op's result; raises ToolError for an error the workflow should see."""
        if replayed is not None:
            await asyncio.sleep(replayed.duration_s / self._scale)
            if replayed.error is not None:
                raise ToolError(replayed.error)
            return replayed.value
        args = op.args
        if op.op == "sql":
            if not isinstance(args.get("sql"), str) or not isinstance(args.get("database"), str):
                raise ToolError("tool 'sql' needs string arguments 'database' and 'sql'")
            return await asyncio.to_thread(run_sql, args["database"], args["sql"], self._sql_limit)
        if op.op == PART:
            return part_of(args.get("source"), int(args.get("index", 0)))
        executor = self._executors.get(op.op)
        if executor is not None:
            return await executor(op, instance)
        raise ToolError(f"no executor for tool op {op.op!r}")

    async def finish(self, op: ToolOp, replayed: ToolOutcome | None, clock: Callable[[], float],
                     instance: InstanceSpec | None = None) -> OpFinished:
        """Run the op; its result or error as the event for the core (a bug in an executor
        still ends the op, with the reason)."""
        try:
            return OpFinished(clock(), op.id, result=await self.run(op, replayed, instance))
        except (ToolError, RetrievalError) as e:
            return OpFinished(clock(), op.id, error=str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("tool op %s failed", op.op)
            return OpFinished(clock(), op.id, error=f"{type(e).__name__}: {e}")
