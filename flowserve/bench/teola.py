"""`flowserve bench teola`: Teola's apps, module chain vs optimised graph, side by side.

Per app, on the built-in `teola` cluster in the simulator, the same workload runs as
* the module chain (`--passes none`, FCFS: each module one unit, after the previous);
* each pass alone (FCFS), all passes (FCFS), and all passes + `topology` batching;
and the report gives mean and p99 latency with the speed-up over the module chain
(Teola's goals, best case: advanced RAG 2.09×, naive RAG 1.62×, search-gen 1.79×).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.config import load_cluster
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload

APPS = ("search_gen", "naive_rag", "advanced_rag")
GOALS = {"advanced_rag": 2.09, "naive_rag": 1.62, "search_gen": 1.79}
PASS_NAMES = ("prune", "decompose", "prefill_split", "pipeline")

VARIANTS: tuple[tuple[str, str, str], ...] = (
    ("module chain", "none", "fcfs"),
    *((f"+{p}", p, "fcfs") for p in PASS_NAMES),
    ("all passes", "all", "fcfs"),
    ("all + topology", "all", "topology"),
)


def _latencies(cluster: Sequence[Any], workload: Any, passes: str, queue: str) -> tuple[list[float], int]:
    res = simulate(cluster, workload, PolicySpec("round_robin", queue, passes=passes), record_calls=False)
    failed = sum(1 for q in res.queries if q.failed)
    return [q.latency for q in res.queries if not q.failed], failed


def run_teola_bench(out: Path, apps: Sequence[str], queries: int, rate: float | None, seed: int,
                    echo: Callable[[str], None], cluster: str = "teola") -> dict[str, Any]:
    specs = load_cluster(cluster)
    report: dict[str, Any] = {"cluster": cluster, "queries": queries, "seed": seed, "apps": {}}
    for app in apps:
        over: dict[str, Any] = {"queries": queries, "seed": seed}
        if rate is not None:
            over["rate"] = rate
        wl = load_workload(app, over)
        rows, runs = [], {}
        for label, passes, queue in VARIANTS:
            lat, failed = _latencies(specs, wl, passes, queue)
            runs[label] = {"passes": passes, "queue": queue, "mean_s": statistics.fmean(lat),
                           "p99_s": float(np.percentile(lat, 99)), "failed": failed}
        base = runs["module chain"]
        for label, r in runs.items():
            r["mean_speedup"] = base["mean_s"] / r["mean_s"]
            r["p99_speedup"] = base["p99_s"] / r["p99_s"]
            rows.append([label, r["passes"], r["queue"], f"{r['mean_s']:.3f}", f"{r['p99_s']:.3f}",
                         f"{r['mean_speedup']:.2f}×", f"{r['p99_speedup']:.2f}×", r["failed"]])
        best = runs["all + topology"]
        goal = GOALS[app]
        report["apps"][app] = {"runs": runs, "goal": goal, "mean_speedup": best["mean_speedup"],
                               "p99_speedup": best["p99_speedup"], "goal_met": best["mean_speedup"] >= goal,
                               "workload": dict(over, kind=app)}
        echo(f"\n{app} ({len(wl.queries)} queries, {cluster}):")
        echo(markdown_table(["variant", "passes", "queue", "mean s", "p99 s", "mean ×", "p99 ×", "failed"], rows))
        echo(f"all passes + topology vs module chain: mean {best['mean_speedup']:.2f}×, "
             f"p99 {best['p99_speedup']:.2f}× (Teola: {goal:.2f}×) — "
             f"{'goal met' if best['mean_speedup'] >= goal else 'goal NOT met'}")
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "teola.json", report)
    echo(f"json: {out / 'teola.json'}")
    return report
