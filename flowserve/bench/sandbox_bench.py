"""The SQL sandbox's price: per-statement latency in warm worker processes (`WorkerPool`)
against the same statements in this process (`run_query`), side by side in one run.

The statements are the agent's kind: small aggregates and lookups on the demo bank
database (SQLite) and on a DuckDB table shaped like its `client` table. The two modes alternate
statement by statement, so a busy machine slows both alike; the overhead is the
difference of the medians (the process hop: a JSON line each way, the limits set and
lifted). Also timed: a worker's start (what a replacement after a kill costs, off the
hot path) and how long a bomb takes to be stopped.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from flowserve.metrics.tables import markdown_table, write_json
from flowserve.sqlexec import SandboxLimits, SQLError, WorkerPool, run_query

STATEMENTS = ("SELECT COUNT(*) FROM client",
              "SELECT gender, COUNT(*) FROM client GROUP BY gender",
              "SELECT client_id, birth_date FROM client WHERE client_id < 20 ORDER BY client_id")


def _databases(folder: Path) -> dict[str, Path]:
    import duckdb

    from flowserve.apps.text2sql.bank import create_demo_db

    sqlite = create_demo_db(folder / "bank.sqlite")
    duck = folder / "bank.duckdb"
    con = duckdb.connect(str(duck))
    con.execute("CREATE TABLE client AS SELECT range AS client_id, CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END "
                "AS gender, DATE '1950-01-01' + range::INTEGER * 97 AS birth_date FROM range(200)")
    con.close()
    return {"sqlite": sqlite, "duckdb": duck}


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def overhead_ms(in_process_s: list[float], pooled_s: list[float]) -> float:
    """The worker hop's cost per statement: difference of the medians, in ms."""
    return (statistics.median(pooled_s) - statistics.median(in_process_s)) * 1e3


def run_sandbox_bench(repeats: int, json_out: Path, console: Console) -> dict[str, Any]:
    rows, results = [], {}
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, WorkerPool(1) as pool:
        dbs = _databases(Path(tmp))
        pool.warm()
        start_s = _timed(lambda: pool.run(dbs["sqlite"], "SELECT 1"))  # the worker's start and first statement
        for kind, db in dbs.items():
            local: list[float] = []
            pooled: list[float] = []
            for i in range(repeats):
                sql = STATEMENTS[i % len(STATEMENTS)]
                local.append(_timed(lambda: run_query(db, sql)))  # noqa: B023 (timed now)
                pooled.append(_timed(lambda: pool.run(db, sql)))  # noqa: B023
            over = overhead_ms(local, pooled)
            results[kind] = {"statements": repeats, "in_process_median_ms": statistics.median(local) * 1e3,
                             "worker_median_ms": statistics.median(pooled) * 1e3, "overhead_ms": over,
                             "ratio": statistics.median(pooled) / statistics.median(local)}
            r = results[kind]
            rows.append([kind, f"{r['in_process_median_ms']:.2f}", f"{r['worker_median_ms']:.2f}",
                         f"{over:+.2f}", f"{r['ratio']:.2f}×"])
        t0 = time.perf_counter()
        try:
            pool.run(dbs["duckdb"], "SELECT length(lpad('x', 2000000000, 'y'))", SandboxLimits(time_limit_s=1.0))
        except SQLError as e:
            bomb = {"stopped_after_s": time.perf_counter() - t0, "error": str(e)}
        else:  # a machine where the bomb fits: report it, it is not a failure of the bench
            bomb = {"stopped_after_s": None, "error": None}
        results["worker_start_s"] = start_s
        results["bomb"] = bomb
    results["load_average"] = load
    console.print(markdown_table(["database", "in process (ms)", "worker (ms)", "overhead (ms)", "ratio"], rows))
    console.print(f"worker start + first statement: {start_s:.2f} s; lpad bomb (time limit 1 s) stopped after "
                  f"{bomb['stopped_after_s'] or float('nan'):.2f} s; load average {load[0]:.2f}", highlight=False)
    write_json(json_out, results)
    console.print(f"json: {json_out}", highlight=False)
    return results
