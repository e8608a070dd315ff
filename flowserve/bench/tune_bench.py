"""`flowserve bench tune`: does `flowserve tune` pay? Per workload of `bench compare` and seed,
the flowserve profile tuned on the trace's first half, and on the held-out second half the
default, the tuned profile and every other contestant of `bench compare`, on the tuning
metric (lower is better).

The goal (issue 43): the tuned profile ≥ 1.05× the default (default ÷ tuned metric)
wherever the default is not already the best contestant on the held-out half, and never
worse than the default by more than 1% anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.policies.registry import profile_of
from flowserve.sim.compare import CONTESTANTS, OURS
from flowserve.tune.profile_search import TuneRequest, tune_profile
from flowserve.tune.trials import Metric
from flowserve.workloads.mixes import EXTRA, SINGLE

WORKLOADS = ("tool_use", "text2sql", "programming", "embodied_agent", "lora")
GAIN = 1.05  # where the default is not the best contestant
TOLERANCE = 0.99  # anywhere


def goal_met(gain: float, default_is_best: bool) -> bool:
    """The goal of one case: ≥ TOLERANCE where the default is best, ≥ GAIN elsewhere."""
    return gain >= (TOLERANCE if default_is_best else GAIN)


def run_case(name: str, seed: int, queries: int, budget: int, jobs: int, metric: Metric,
             scorers: Sequence[str], log: Callable[[str], None]) -> dict[str, Any]:
    case = {**SINGLE, **EXTRA}[name]
    cluster = load_cluster(case.cluster)
    peers = {k: v for k, v in CONTESTANTS.items() if k != OURS}
    req = TuneRequest(case.build(queries, seed), cluster, profile_of("flowserve"), budget, seed, jobs,
                      metric=metric, scorers=tuple(scorers), peers=peers)
    t0 = time.perf_counter()
    report = tune_profile(req, log)
    best_peer = min(report.peers_test, key=lambda k: report.peers_test[k])
    default_is_best = report.default_test <= report.peers_test[best_peer]
    return {"workload": name, "cluster": case.cluster, "seed": seed, **report.describe(),
            "best_peer": best_peer, "best_peer_test": report.peers_test[best_peer],
            "default_is_best": default_is_best, "goal_met": goal_met(report.gain, default_is_best),
            "wall_s": time.perf_counter() - t0}


def table(rows: Sequence[dict[str, Any]]) -> str:
    return markdown_table(
        ["workload", "seed", "default s", "tuned s", "tuned ×", "kept", "best other", "its s", "default best",
         "goal"],
        [[r["workload"], r["seed"], r["default_test"], r["tuned_test"], f"{r['gain']:.3f}",
          "tuned" if r["tuned"] else "default", r["best_peer"], r["best_peer_test"],
          "yes" if r["default_is_best"] else "no", "met" if r["goal_met"] else "missed"] for r in rows])


def run_tune_bench(out: Path, workloads: Sequence[str] | None, seeds: Sequence[int], queries: int, budget: int,
                   jobs: int, metric: Metric, scorers: Sequence[str], log: Callable[[str], None]) -> dict[str, Any]:
    names = list(workloads or WORKLOADS)
    known = {**SINGLE, **EXTRA}
    for name in names:
        if name not in known:
            raise ConfigError(f"--workload: unknown {name!r}; known: {', '.join(known)}")
    t0 = time.perf_counter()
    rows = []
    for name in names:
        for seed in seeds:
            log(f"## {name}, seed {seed}")
            rows.append(run_case(name, seed, queries, budget, jobs, metric, scorers, log))
    data = {"bench": "tune", "queries": queries, "budget": budget, "metric": metric, "seeds": list(seeds),
            "scorers": list(scorers), "cases": rows, "goal_met": all(r["goal_met"] for r in rows),
            "wall_s": time.perf_counter() - t0}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench-tune.json", data)
    (out / "bench-tune.md").write_text(table(rows) + "\n")
    return data
