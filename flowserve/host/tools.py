"""Tool executors: what the live driver runs for a `RunOp` (the core only names the op).

* `sql` — one read-only statement on a SQLite or DuckDB file in the SQL sandbox
  (`flowserve.sqlexec`), in one of the runner's warm worker processes under OS memory
  and CPU limits, killed at its time limit; the database's error message (or what the
  sandbox refused, or which limit killed it) comes back as the op's error;
* a workflow's own ops (`register`: the Text-to-SQL agent's retrievers);
* the retrieval ops (`flowserve.retrieval.executors`: chunk, embed, vector ingest and
  search, rerank, web search, aggregate) on the real offline components, given the
  instance the core bound a batch to;
* a replayed workload's tool steps (any op the query's oracle knows): wait the recorded
  duration (scaled like simulated engines) and report the recorded error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from flowserve.errors import ConfigError, FailureKind
from flowserve.graph.oracle import ToolOutcome
from flowserve.graph.primitives import PART
from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.executors import Executor
from flowserve.sqlexec import SandboxLimits, SQLError, SQLRefused, WorkerPool, run_query
from flowserve.types.events import OpFinished
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import ToolOp

MAX_ROWS = 20


class ToolError(Exception):
    """The tool ran and reports an error (the workflow decides what to do with it); `kind`:
    a limit refused it, or it failed."""

    def __init__(self, message: str, kind: FailureKind = FailureKind.TOOL_ERROR) -> None:
        super().__init__(message)
        self.kind = kind


def run_sql(path: str, sql: str, time_limit_s: float, max_rows: int = MAX_ROWS, pool: WorkerPool | None = None,
            memory_bytes: int = SandboxLimits.worker_memory_bytes) -> dict[str, Any]:
    """Execute one read-only statement in the SQL sandbox (`flowserve.sqlexec`), in a
    worker of `pool` (else in this process: trusted SQL only); raises ToolError with the
    database's message or what the sandbox refused."""
    limits = SandboxLimits(time_limit_s=time_limit_s, max_rows=max_rows, worker_memory_bytes=memory_bytes)
    try:
        return pool.run(path, sql, limits) if pool is not None else run_query(path, sql, limits)
    except SQLRefused as e:
        raise ToolError(str(e), FailureKind.LIMIT) from None
    except SQLError as e:
        raise ToolError(str(e)) from None


log = logging.getLogger("flowserve.gateway")


class ToolRunner:
    def __init__(self, time_scale: float = 1.0, sql_time_limit_s: float = 5.0,
                 executors: Mapping[str, Executor] | None = None, sql_workers: int = 2,
                 sql_memory_bytes: int = SandboxLimits.worker_memory_bytes) -> None:
        self._scale = time_scale
        self._sql_limit = sql_time_limit_s
        self._sql_memory = sql_memory_bytes
        self.sql_pool = WorkerPool(sql_workers)  # its processes start with the first statement
        self._executors = dict(executors or {})
        self._workflow_ops: dict[str, Callable[[Mapping[str, Any]], Any]] = {}

    def register(self, executors: Mapping[str, Callable[[Mapping[str, Any]], Any]]) -> None:
        """Executors of a workflow's own tool ops (op name → function of the arguments, run
        in a worker thread); a name registered twice is a configuration error."""
        clash = sorted(set(executors) & (set(self._workflow_ops) | set(self._executors) | {"sql", PART}))
        if clash:
            raise ConfigError(f"tool op(s) {clash} registered twice")
        self._workflow_ops.update(executors)

    def close(self) -> None:
        self.sql_pool.close()

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
            return await asyncio.to_thread(run_sql, args["database"], args["sql"], self._sql_limit, MAX_ROWS,
                                           self.sql_pool, self._sql_memory)
        executor = self._executors.get(op.op)
        if executor is not None:
            return await executor(op, instance)
        fn = self._workflow_ops.get(op.op)
        if fn is not None:
            return await asyncio.to_thread(fn, args)
        raise ToolError(f"no executor for tool op {op.op!r}")

    async def finish(self, op: ToolOp, replayed: ToolOutcome | None, clock: Callable[[], float],
                     instance: InstanceSpec | None = None) -> OpFinished:
        """Run the op; its result or error as the event for the core (a bug in an executor
        still ends the op, with the reason)."""
        try:
            return OpFinished(clock(), op.id, result=await self.run(op, replayed, instance))
        except ToolError as e:
            return OpFinished(clock(), op.id, error=str(e), kind=e.kind)
        except RetrievalError as e:
            return OpFinished(clock(), op.id, error=str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("tool op %s failed", op.op)
            return OpFinished(clock(), op.id, error=f"{type(e).__name__}: {e}")
