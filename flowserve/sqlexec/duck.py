"""DuckDB in the sandbox: opened read-only with external access disabled (no files, no
ATTACH/COPY/httpfs), a memory and a thread limit, the configuration locked so SQL cannot
undo it; only SELECT-like statements run; a timer interrupts a query past its time limit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from flowserve.sqlexec.encode import collect
from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused

ALLOWED_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


def run_duckdb(path: str, sql: str, limits: SandboxLimits,
               on_open: Callable[[], None] | None = None) -> dict[str, Any]:
    import duckdb  # a heavy import, only when a DuckDB database is used

    config = {"enable_external_access": False, "memory_limit": limits.memory_limit,
              "threads": limits.threads, "lock_configuration": True}
    try:
        con = duckdb.connect(path, read_only=True, config=config)
    except duckdb.Error as e:
        raise SQLError(f"cannot open database: {e}") from None
    timer = threading.Timer(limits.time_limit_s, con.interrupt)
    try:
        if on_open is not None:
            on_open()
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as e:
            raise SQLError(str(e)) from None
        if len(statements) != 1:
            raise SQLError(f"one statement at a time, got {len(statements)}")
        kind = str(statements[0].type).rsplit(".", 1)[-1]
        if kind not in ALLOWED_STATEMENTS:
            raise SQLRefused(f"refused by the read-only sandbox: {kind} statement")
        timer.start()
        try:
            cur = con.execute(sql)
            columns = [d[0] for d in cur.description or ()]
            return collect(columns, iter(cur.fetchone, None), limits.max_rows, limits.max_result_bytes)
        except duckdb.InterruptException:
            raise SQLError(f"query exceeded the time limit of {limits.time_limit_s:g} s") from None
        except duckdb.PermissionException as e:
            raise SQLRefused(f"refused by the read-only sandbox: {e}") from None
        except duckdb.Error as e:
            raise SQLError(str(e)) from None
    finally:
        timer.cancel()
        con.close()
