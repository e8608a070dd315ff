"""`flowserve demo`: Text-to-SQL on Hetero-1 under every dispatch policy and the designed pairs."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from flowserve.config import load_cluster
from flowserve.metrics.plots import plot_attainment
from flowserve.metrics.tables import POLICY_TABLE_LEGEND, policy_table, rank_policies, write_json
from flowserve.policies import DISPATCH_NAMES, QUEUE_POLICIES
from flowserve.sim.evaluate import DEFAULT_SLO_SCALES, evaluate
from flowserve.sim.run import PolicySpec, standalone_times
from flowserve.workloads import load_workload

# The pairs the papers and peers deploy: every dispatch policy with FCFS queues, and the
# queue policies with the dispatch policy each was designed with.
DESIGNED_PAIRS = (("round_robin", "urgency"), ("least_load", "urgency"), ("hexgen_wb", "urgency"),
                  ("preble_e2", "prefix_groups"), ("flowserve", "flowserve"))


def demo_policies(every_pair: bool = False) -> list[PolicySpec]:
    if every_pair:
        return [PolicySpec(d, q) for d in DISPATCH_NAMES for q in QUEUE_POLICIES]
    pairs = [(d, "fcfs") for d in DISPATCH_NAMES] + [p for p in DESIGNED_PAIRS if p[0] in DISPATCH_NAMES]
    return [PolicySpec(d, q) for d, q in pairs]


def _evaluate_one(queries: int, rate: float, policy: PolicySpec) -> tuple[dict[str, Any], list[float], int, float]:
    """One policy of the demo (in a worker process): its summary, the latencies of its
    primary run, how many simulations it took and their wall time."""
    start = time.perf_counter()
    cluster = load_cluster("hetero-1")
    wl = load_workload("text2sql", {"queries": queries, "rate": rate})
    summary, runs = evaluate(cluster, wl, policy, DEFAULT_SLO_SCALES, standalone_times(wl, cluster))
    return (summary, [q.latency for q in runs[max(runs)].queries], len({id(r) for r in runs.values()}),
            time.perf_counter() - start)


def run_demo(out: Path, queries: int, rate: float, console: Console,
             progress: Callable[[], Progress], log: Callable[[str], None] | None = None,
             every_pair: bool = False, jobs: int | None = None) -> dict[str, Any]:
    """`log`: where a line per finished policy goes (for a stderr that is no terminal,
    where the progress bar stays hidden). `jobs`: policies simulated at once, each in its
    own process (default: up to 2, the CPUs there are); the results do not depend on it."""
    wl = load_workload("text2sql", {"queries": queries, "rate": rate})
    policies = demo_policies(every_pair)
    jobs = max(1, min(jobs or min(2, os.cpu_count() or 1), len(policies)))
    summaries: dict[str, dict[str, Any]] = {}
    latencies: dict[str, list[float]] = {}
    with progress() as bar, ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        task = bar.add_task("policies × SLO scales", total=len(policies) * len(DEFAULT_SLO_SCALES))
        # the deadline-aware policies (several simulations each) first, so both processes end together
        first = sorted(policies, key=lambda p: not p.uses_deadline())
        pending = {pool.submit(_evaluate_one, queries, rate, p): p for p in first}
        for i, future in enumerate(as_completed(pending), 1):
            p = pending[future]
            summaries[p.label], latencies[p.label], sims, seconds = future.result()
            bar.advance(task, len(DEFAULT_SLO_SCALES))
            if log:
                s = summaries[p.label]
                log(f"[{i}/{len(policies)}] {p.label}: {sims} simulation{'s' * (sims > 1)} in {seconds:.1f} s; "
                    f"min SLO scale at 95% {_num(s['min_slo_scale']['0.95'])}, mean latency "
                    f"{s['latency_s']['mean']:.1f} s")
    summaries = {p.label: summaries[p.label] for p in policies}  # the plot's panels in the policies' order
    baseline = "round_robin+fcfs"
    ranked = rank_policies(summaries)
    best = ranked[0] if summaries[ranked[0]]["min_slo_scale"]["0.95"] is not None else None
    table = policy_table({label: summaries[label] for label in ranked}, baseline, best)
    title = (f"Text-to-SQL ({wl.name}, {queries} queries at {rate:g} q/s) on Hetero-1 (2×A100 + 2×A6000, "
             f"Llama-3.1-70B TP 8): every policy, best first; gains vs {baseline}")
    console.print(title + ":", highlight=False)
    console.print(table, highlight=False)
    console.print(POLICY_TABLE_LEGEND, highlight=False)
    plot = plot_attainment(summaries, out / "demo-attainment.png", f"{wl.name} on hetero-1", latencies)
    data = {"cluster": "hetero-1", "workload": wl.name, "baseline": baseline, "ranking": ranked, "best": best,
            "results": summaries}
    js = write_json(out / "demo.json", data)
    (out / "demo.md").write_text(f"# {title}\n\n{table}\n\n{POLICY_TABLE_LEGEND}\n\n"
                                 f"![SLO attainment and latency]({plot.name})\n")
    console.print(f"plot: {plot}\njson: {js}\ntable: {out / 'demo.md'}")
    return data


def _num(x: float | None) -> str:
    return "not reached" if x is None else f"{x:g}"
