"""Core speed: simulated LLM calls per wall second, dispatch decisions per second.

Timed as a benchmark (never in a test): the simulator runs a text2sql workload sized to
~N calls on Hetero-1; the dispatch micro-benchmark times `choose` on a busy view.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from flowserve.bench.report import markdown_table, write_json
from flowserve.config import load_cluster
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload

CALLS_PER_QUERY = 19.5  # mixed text2sql, measured


def run_core_bench(calls: int, json_out: Path, console: Console) -> dict[str, Any]:
    cluster = load_cluster("hetero-1")
    n_queries = max(10, round(calls / CALLS_PER_QUERY))
    # 4 instances: ~4 q/s keeps them busy without unbounded queues
    wl = load_workload("text2sql", {"queries": n_queries, "rate": 4.0, "seed": 1})
    rows, results = [], {}
    for label, policy in (("round_robin+fcfs", PolicySpec()),
                          ("least_load+fcfs", PolicySpec("least_load"))):
        t0 = time.perf_counter()
        res = simulate(cluster, wl, policy, record_calls=False)
        wall = time.perf_counter() - t0
        n_calls = wl.calls
        results[label] = {"calls": n_calls, "queries": len(res.queries), "wall_s": wall,
                          "sim_wall_s": res.sim_wall_s, "calls_per_s": n_calls / res.sim_wall_s,
                          "decisions_per_s": res.decisions / res.sim_wall_s,
                          "events": res.events, "virtual_s": res.makespan}
        rows.append([label, n_calls, res.sim_wall_s, n_calls / res.sim_wall_s, res.events])
    data = {"bench": "core", "python": platform.python_version(), "machine": platform.machine(),
            "goal_calls_per_s": 5000, "results": results}
    console.print(markdown_table(["policy", "calls", "wall s", "calls/s", "events"], rows),
                  highlight=False)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data
