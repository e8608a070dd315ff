"""Core speed: simulated LLM calls per wall second, dispatch decisions per second.

Timed as a benchmark (never in a test): the simulator runs a text2sql workload sized to
~N calls on Hetero-1 (CPU seconds are reported beside wall seconds: this machine is
shared); the dispatch benchmark feeds the core single-call queries while every instance
is full, so each arrival is one complete dispatch decision (graph runtime, predicted
costs, policy, queue insertion), and also times the policy's `choose` alone.
"""

from __future__ import annotations

import gc
import platform
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from flowserve.apps.single import SingleCall
from flowserve.config import load_cluster
from flowserve.core.scheduler import SchedulerCore
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.policies import make_dispatch, queue_factory
from flowserve.profiles.instance import instance_profile
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.events import InstanceCapacity, QueryArrived
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, WorkflowRef
from flowserve.workloads import load_workload
from flowserve.workloads.base import QuerySpec, Workload

CALLS_PER_QUERY = 19.5  # mixed text2sql, measured


def dispatch_rate(cluster: tuple[InstanceSpec, ...], policy: str, n: int) -> dict[str, float]:
    """Full dispatch decisions per second with the cyclic GC paused, as the simulator runs
    (`decisions_per_s`), and with it running (`decisions_gc_per_s`: a full collection walks
    every long-lived object of the process, so it depends on what else is loaded)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        paused = _dispatch_rate(cluster, policy, n)
    finally:
        if enabled:
            gc.enable()
    running = _dispatch_rate(cluster, policy, n)
    return {**paused, "decisions_gc_per_s": running["decisions_per_s"]}


def _dispatch_rate(cluster: tuple[InstanceSpec, ...], policy: str, n: int) -> dict[str, float]:
    core = SchedulerCore(cluster, make_dispatch(policy), queue_factory("fcfs"), instance_profile,
                         workflows={SingleCall.name: SingleCall})
    for spec in cluster:  # every engine full: arrivals are dispatched and queued, not released
        core.handle(InstanceCapacity(0.0, spec.name, 0, 0, 0))
    prompts = [tuple(range(i * 7, i * 7 + 2048)) for i in range(64)]
    queries = [Query(i, i * 1e-3, "chat", WorkflowRef(SingleCall.name, ("chat", prompts[i % 64], 64, None)))
               for i in range(n)]
    t0 = time.perf_counter()
    for q in queries:
        core.handle(QueryArrived(q.arrival, q))
    end_to_end = n / (time.perf_counter() - t0)
    (call_id,) = core.calls_of(queries[0].id)
    decide = core.decide
    t0 = time.perf_counter()
    for _ in range(n):
        decide(call_id)
    return {"decisions_per_s": end_to_end, "choose_per_s": n / (time.perf_counter() - t0),
            "queued": sum(s.queued for s in core.instance_status())}


def statement(n: int) -> Workload:
    """One query of n independent calls (an LLM-in-SQL statement over n rows)."""
    step = tuple(CallStep("row", (Segment(1, 40), Segment(1000 + i, 8)), 2) for i in range(n))
    return Workload("statement", (QuerySpec(0, 0.0, QueryPlan("llm_sql", (step,))),))


def statement_rates(cluster: tuple[InstanceSpec, ...], n: int) -> dict[str, dict[str, float]]:
    """The n-call statement simulated with late and with ready-time binding."""
    wl, out = statement(n), {}
    for binding in ("late", "ready"):
        t0 = time.perf_counter()
        res = simulate(cluster, wl, PolicySpec("least_load", "fcfs", {"binding": binding}), record_calls=False)
        wall = time.perf_counter() - t0
        [q] = res.queries
        assert q.failed is None, q.failed
        out[binding] = {"calls": n, "wall_s": wall, "calls_per_s": n / wall, "latency_s": q.latency}
    return out


def run_core_bench(calls: int, json_out: Path, console: Console) -> dict[str, Any]:
    cluster = load_cluster("hetero-1")
    n_queries = max(10, round(calls / CALLS_PER_QUERY))
    wl = load_workload("text2sql", {"queries": n_queries, "rate": 1.0, "seed": 1})
    rows, results = [], {}
    for label, policy in (("round_robin+fcfs", PolicySpec()),
                          ("least_load+fcfs", PolicySpec("least_load"))):
        cpu0, t0 = time.process_time(), time.perf_counter()
        res = simulate(cluster, wl, policy, record_calls=False)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
        n_calls = wl.calls
        disp = dispatch_rate(cluster, policy.dispatch, 20_000)
        results[label] = {"calls": n_calls, "queries": len(res.queries), "wall_s": wall, "cpu_s": cpu,
                          "sim_wall_s": res.sim_wall_s, "calls_per_s": n_calls / wall,
                          "calls_per_cpu_s": n_calls / cpu, "events": res.events,
                          "virtual_s": res.makespan, **disp}
        rows.append([label, n_calls, wall, n_calls / wall, n_calls / cpu, res.events,
                     disp["decisions_per_s"], disp["decisions_gc_per_s"], disp["choose_per_s"]])
    stmt = statement_rates(cluster, calls)
    data = {"bench": "core", "python": platform.python_version(), "machine": platform.machine(),
            "goal_calls_per_s": 5000, "results": results, "statement": stmt}
    console.print(markdown_table(["policy", "calls", "wall s", "calls/s", "calls/CPU-s", "events",
                                  "dispatch decisions/s (GC paused)", "with the GC", "choose()/s"], rows),
                  highlight=False)
    console.print(markdown_table(["one query of N calls, least_load", "calls", "wall s", "calls/s",
                                  "statement latency s"],
                                 [[f"{b} binding", r["calls"], r["wall_s"], r["calls_per_s"], r["latency_s"]]
                                  for b, r in stmt.items()]), highlight=False)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data
