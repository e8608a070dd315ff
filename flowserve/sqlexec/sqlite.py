"""SQLite in the sandbox: a read-only URI connection, an authorizer that allows reads
only, `SQLITE_LIMIT_ATTACHED` 0, a bounded `SQLITE_LIMIT_LENGTH`, a progress handler
for the time limit.

The authorizer denies everything but SELECT, reading columns, recursive CTEs, functions
outside a deny list (file access, extensions) and introspection pragmas. ATTACH (and so
`VACUUM INTO`, which attaches its target first), DETACH, transactions, writes and
writing pragmas are refused; the refusal names the action and its argument.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from flowserve.sqlexec.encode import collect
from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused

READ_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "collation_list", "function_list", "pragma_list", "compile_options",
})
DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
                              "zipfile", "sqlar_compress", "sqlar_uncompress"})
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
_ACTIONS = ("CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
            "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE",
            "DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER",
            "DROP_VIEW", "INSERT", "PRAGMA", "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH",
            "ALTER_TABLE", "REINDEX", "ANALYZE", "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT",
            "RECURSIVE")
_NAMES = {getattr(sqlite3, f"SQLITE_{n}"): n for n in _ACTIONS}  # authorizer action codes (1..33)
# Reading an eponymous virtual table (pragma_table_info(...)) loads its schema with UPDATE
# actions on sqlite_master's own columns: an artefact of schema parsing, not a write.
_SCHEMA = ("sqlite_master", "sqlite_schema", "sqlite_temp_master")


class _Guard:
    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, a: str | None, b: str | None, db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (b or "").lower() not in DENIED_FUNCTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (a or "").lower() in READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and a in _SCHEMA and db in ("main", "temp"):
            return sqlite3.SQLITE_OK
        if self.refused is None:
            what = _NAMES.get(action, f"action {action}")
            arg = b if action == sqlite3.SQLITE_FUNCTION else a
            self.refused = f"{what}" + (f" ({arg})" if arg else "")
        return sqlite3.SQLITE_DENY


def run_sqlite(path: str, sql: str, limits: SandboxLimits,
               on_open: Callable[[], None] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + limits.time_limit_s
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error as e:
        raise SQLError(f"cannot open database: {e}") from None
    guard = _Guard()
    try:
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
        con.set_authorizer(guard)
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        if on_open is not None:
            on_open()
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description or ()]
        if not columns:  # a statement without a result (only pragmas get this far)
            raise SQLRefused("refused: the statement returns no rows (only queries are allowed)")
        return collect(columns, iter(cur.fetchone, None), limits.max_rows, limits.max_result_bytes)
    except SQLError:
        raise
    except sqlite3.Warning as e:  # e.g. more than one statement
        raise SQLError(str(e)) from None
    except (sqlite3.Error, OverflowError, MemoryError) as e:
        if guard.refused is not None:
            raise SQLRefused(f"refused by the read-only sandbox: {guard.refused}") from None
        msg = str(e)
        if msg == "interrupted":
            msg = f"query exceeded the time limit of {limits.time_limit_s:g} s"
        elif "too big" in msg:
            msg = f"{msg} (values are limited to {limits.max_value_bytes} bytes)"
        raise SQLError(msg) from None
    finally:
        con.close()
