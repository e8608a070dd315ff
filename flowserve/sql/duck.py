"""Embedded DuckDB connections of LLM-in-SQL statements.

Every one has its progress bar off: DuckDB prints it to the host process's stdout on
queries over about 2 s, into a gateway's or a CLI's output. A *sandboxed* one runs a
statement that did not come from the user's own shell (a simulated workload, a service):
no file system, no extensions, no settings changed — only the tables registered
through flowserve (read before the sandbox closes) are readable, and nothing is written.
"""

from __future__ import annotations

import duckdb

SANDBOX = {"enable_external_access": False, "autoload_known_extensions": False,
           "autoinstall_known_extensions": False}


def embedded_connection(external_access: bool) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={} if external_access else dict(SANDBOX))
    con.execute("SET enable_progress_bar = false")
    if not external_access:
        con.execute("SET lock_configuration = true")
    return con
