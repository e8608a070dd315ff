"""`flowserve bench hexgen`: the Hexgen-Text2SQL experiments (paper §5) in the simulator.

Hetero-1/2 × text2sql workloads (synthetic financial / formula1 / mixed, real CHESS
traces 1 and 2 replayed) × 0.5 and 1.0 q/s × five policy pairs; for each: minimum SLO
scale at 95% and 99% attainment, throughput, every ratio against RR+FCFS side by side.
Then the paper's Table 1 (stage mix per instance before/after WB), Fig. 5 (α
sensitivity), Table 3 (time of the full α sweep of a 100-s window) and diagnostics
(`hexgen_diag`). Everything runs under two engine settings (`ENGINES`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.bench.hexgen_diag import capacity_ratio, decision_terms, stage_mix, term_table
from flowserve.config import load_cluster
from flowserve.metrics.summary import percentiles, summarize
from flowserve.metrics.tables import write_json
from flowserve.policies.hexgen import DEFAULT_ALPHA, DEFAULT_BETA, HexgenWB
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.scales import GRID, ScaleSearch
from flowserve.sim.simulator import SimResult
from flowserve.tune.alpha import JOBS, sweep_alpha
from flowserve.tune.job import SweepJob
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import load_workload
from flowserve.workloads.base import Workload

BASELINE = "RR+FCFS"
POLICIES: dict[str, PolicySpec] = {
    "RR+FCFS": PolicySpec("round_robin", "fcfs"),
    "RR+PQ": PolicySpec("round_robin", "urgency"),
    "WB+FCFS": PolicySpec("hexgen_wb", "fcfs"),
    "WB+PQ": PolicySpec("hexgen_wb", "urgency"),
    "WB+PQ+online-α": PolicySpec("hexgen_wb", "urgency", {"alpha_tuning": True}),
}
HINTS = {"RR+PQ": "RR+FCFS", "WB+PQ": "WB+FCFS", "WB+PQ+online-α": "WB+PQ"}  # where a search starts
WORKLOADS = ("text2sql-financial", "text2sql-formula1", "text2sql-mixed", "chess-trace1", "chess-trace2")
# The paper's Trace 1 (financial), Trace 2 (formula1), Trace 3 (both): here the real
# CHESS traces 1 and 2 and the synthetic mixed generator.
PAPER_TRACES = ("chess-trace1", "chess-trace2", "text2sql-mixed")
# Engine settings (overrides of every instance's engine fields). "default": flowserve's
# defaults, like current vLLM/SGLang (prefix caching, 2048-token chunked-prefill budget).
# "vllm-0.6": what the paper's early-2025 vLLM baseline ran: no prefix caching, and the
# 512-token chunked-prefill budget vLLM 0.6 chose for long-context models such as
# Llama-3.1-70B (128k), so prompts wait for admission and the local queue order matters.
ENGINES: dict[str, dict[str, Any]] = {
    "default": {},
    "vllm-0.6": {"prefix_caching": False, "token_budget": 512},
}

Key = tuple[str, str, str, float]  # engine, cluster, workload, rate


@dataclass(frozen=True)
class Plan:
    settings: tuple[Key, ...]
    queries: int
    policies: tuple[str, ...]
    sensitivity: tuple[tuple[str, str, str], ...]  # (engine, cluster, workload) at 0.5 q/s
    alphas: tuple[float, ...]
    tuning: tuple[Key, ...]
    table1: tuple[str, str, float]  # (cluster, workload, rate), every engine
    capacity: bool = True
    seed: int = 0
    window_s: float = 100.0


def _grid(engines: Sequence[str], clusters: Sequence[str], workloads: Sequence[str],
          rates: Sequence[float]) -> tuple[Key, ...]:
    return tuple((e, c, w, r) for e in engines for c in clusters for w in workloads for r in rates)


CLUSTERS = ("hetero-1", "hetero-2")
FULL = Plan(
    settings=_grid(("default",), CLUSTERS, WORKLOADS, (0.5, 1.0)) + _grid(("vllm-0.6",), CLUSTERS, PAPER_TRACES,
                                                                          (0.5, 1.0)),
    queries=150, policies=tuple(POLICIES),
    sensitivity=tuple(("default", c, w) for c in CLUSTERS for w in PAPER_TRACES)
    + tuple(("vllm-0.6", "hetero-1", w) for w in PAPER_TRACES),
    alphas=(0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0),
    tuning=_grid(("default",), CLUSTERS, PAPER_TRACES, (0.5, 1.0)),
    table1=("hetero-2", "text2sql-mixed", 0.5),
)
QUICK = Plan(
    settings=_grid(tuple(ENGINES), ("hetero-1",), ("text2sql-mixed",), (1.0,)), queries=60,
    policies=tuple(POLICIES), sensitivity=(("default", "hetero-1", "text2sql-mixed"),), alphas=(0.0, 0.5, 1.0),
    tuning=(("default", "hetero-1", "text2sql-mixed", 1.0),), table1=("hetero-1", "text2sql-mixed", 1.0),
    capacity=False,
)


@dataclass
class Setting:
    engine: str
    cluster: str
    ref: str  # the workload's built-in name
    specs: tuple[InstanceSpec, ...]
    workload: Workload
    rate: float
    standalone: list[float]

    @property
    def key(self) -> str:
        return f"{self.cluster} / {self.ref} / {self.rate} q/s"


def make_setting(engine: str, cluster: str, workload: str, rate: float, queries: int, seed: int) -> Setting:
    specs = load_cluster(cluster, ENGINES[engine] or None)
    wl = load_workload(workload, {"rate": rate, "queries": queries, "seed": seed})
    return Setting(engine, cluster, workload, specs, wl, rate, standalone_times(wl, specs))


# --------------------------------------------------------------------------- one setting


def run_policy(st: Setting, policy: PolicySpec, log: list | None = None,
               hint: dict[str, float | None] | None = None) -> dict[str, Any]:
    """One policy on one setting: min SLO scales (deadline-aware: a search over the grid
    started at `hint`, a similar policy's scales) and the figures of the loosest run."""
    top = GRID[-1]

    def run(scale: float | None) -> SimResult:
        disp = None
        if log is not None and (scale is None or scale == top):
            disp = HexgenWB(**dict(policy.dispatch_params))
            disp.record_to(log)
        return simulate(st.specs, st.workload, policy, scale, st.standalone, dispatch=disp, jobs=JOBS)

    t0 = time.perf_counter()
    search = ScaleSearch(run, policy.uses_deadline())
    hint = hint or {}
    loose = search.loosest()  # first, so an instrumented policy logs this run
    summary = search.summary(hint.get("0.95"), hint.get("0.99"))
    s = summarize(loose)
    summary.update({
        "throughput_qps": s["throughput_qps"], "latency_s": s["latency_s"],
        "token_hit_rate": s["token_hit_rate"], "failed": s["failed"],
        "call_queueing_s": s["call_queueing_s"]["mean"],
        "instances": s["instances"], "stage_mix": stage_mix(loose),
        "wall_s": time.perf_counter() - t0,
        "alpha_changes": [dict(pc.params, time=pc.time) for pc in loose.policy_changes],
    })
    return summary


def run_setting(key: Key, queries: int, seed: int, policies: Sequence[str]) -> tuple[dict[str, Any], list]:
    """Every policy on one setting; also WB+FCFS's dispatch decisions (for diagnostics)."""
    st = make_setting(*key, queries, seed)
    results: dict[str, dict[str, Any]] = {}
    log: list = []
    for label in policies:
        hint = results.get(HINTS.get(label, ""), {}).get("min_slo_scale")
        results[label] = run_policy(st, POLICIES[label], log if label == "WB+FCFS" else None, hint)
    decisions = decision_terms(log, DEFAULT_ALPHA, DEFAULT_BETA)
    return {"engine": st.engine, "cluster": st.cluster, "workload": st.ref, "rate": st.rate, "key": st.key,
            "calls": st.workload.calls, "standalone_s": percentiles(st.standalone), "results": results,
            "ratios": ratios(results) if BASELINE in results else {}}, decisions


# --------------------------------------------------------------------------- ratios


def ratios(results: dict[str, dict[str, Any]], baseline: str = BASELINE) -> dict[str, dict[str, float | None]]:
    """Every policy against the baseline: min-scale ratios (baseline / policy: > 1 is
    better) and throughput ratio (policy / baseline)."""
    base = results[baseline]
    return {label: {"95": _ratio(base["min_slo_scale"]["0.95"], r["min_slo_scale"]["0.95"]),
                    "99": _ratio(base["min_slo_scale"]["0.99"], r["min_slo_scale"]["0.99"]),
                    "throughput": _ratio(r["throughput_qps"], base["throughput_qps"])}
            for label, r in results.items()}


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def aggregate(settings: Sequence[dict[str, Any]], policy: str, against: str, key: str,
              rate: float | None = None) -> dict[str, float | int | None]:
    """Average, minimum and maximum of one ratio over settings (undefined ratios left out)."""
    vals = []
    for s in settings:
        res = s["results"]
        if (rate is not None and s["rate"] != rate) or policy not in res or against not in res:
            continue
        r = ratios(res, against)[policy][key]
        if r is not None:
            vals.append(r)
    if not vals:
        return {"avg": None, "max": None, "min": None, "n": 0}
    return {"avg": float(np.mean(vals)), "max": float(np.max(vals)), "min": float(np.min(vals)), "n": len(vals)}


def summary(settings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in POLICIES:
        if policy != BASELINE:
            out[policy] = {k: aggregate(settings, policy, BASELINE, k) for k in ("95", "99")}
            out[policy]["throughput@1.0"] = aggregate(settings, policy, BASELINE, "throughput", rate=1.0)
    out["ablation"] = {f"WB+PQ vs {b}": {k: aggregate(settings, "WB+PQ", b, k) for k in ("95", "99")}
                       for b in ("RR+PQ", "WB+FCFS")}
    return out


# --------------------------------------------------------------------------- α studies


def sensitivity(st: Setting, alphas: Sequence[float], scale: float) -> list[dict[str, Any]]:
    """Fig. 5: WB+PQ under fixed α at one SLO scale: attainment, mean and p95 latency."""
    rows = []
    for a in alphas:
        res = simulate(st.specs, st.workload, PolicySpec("hexgen_wb", "urgency", {"alpha": a}), scale,
                       st.standalone, record_calls=False)
        lat = [q.latency for q in res.queries if q.failed is None]
        rows.append({"alpha": a, "scale": scale, "attainment": sum(1 for q in res.queries if q.met) / len(res.queries),
                     "mean_s": float(np.mean(lat)), "p95_s": float(np.percentile(lat, 95))})
    return rows


def tuning_time(st: Setting, window_s: float, scale: float) -> dict[str, Any]:
    """Table 3: wall time of the full α sweep of one window's trace (the first `window_s`
    seconds of arrivals, deadlines at `scale`)."""
    keep = [i for i, q in enumerate(st.workload.queries) if q.arrival < window_s]
    wl = replace(st.workload, queries=tuple(st.workload.queries[i] for i in keep))
    job = SweepJob(wl, st.specs, None, tuple(scale * st.standalone[i] for i in keep), "urgency")
    t0 = time.perf_counter()
    res = sweep_alpha(job)
    wall = time.perf_counter() - t0
    return {"engine": st.engine, "cluster": st.cluster, "workload": st.ref, "rate": st.rate,
            "queries": res.queries, "calls": res.calls, "simulations": len(res.mean_latency), "wall_s": wall,
            "alpha": res.alpha, "mean_latency": {str(a): v for a, v in res.mean_latency.items()}}


# --------------------------------------------------------------------------- the bench


def run_hexgen_bench(out: Path, quick: bool, queries: int | None, console: Console,
                     jobs: int = 1) -> dict[str, Any]:
    from flowserve.bench.hexgen_report import write_report

    plan = QUICK if quick else FULL
    if queries is not None:
        plan = replace(plan, queries=queries)
    t_start = time.perf_counter()
    engines = list(dict.fromkeys(k[0] for k in plan.settings))
    data: dict[str, Any] = {"bench": "hexgen", "quick": quick, "queries": plan.queries, "seed": plan.seed,
                            "alpha": DEFAULT_ALPHA, "beta": DEFAULT_BETA, "baseline": BASELINE,
                            "engines": {e: ENGINES[e] for e in engines}, "grid": list(GRID), "jobs": jobs}
    decisions: dict[str, list] = {e: [] for e in engines}
    results: dict[Key, dict[str, Any]] = {}

    def done(key: Key, res: tuple[dict[str, Any], list], t: float) -> None:
        results[key] = res[0]
        decisions[key[0]].extend(res[1])
        console.print(f"[{len(results)}/{len(plan.settings)}] {key[0]}: {res[0]['key']} ({t:.0f} s)", highlight=False)

    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            futures = {k: (pool.submit(run_setting, k, plan.queries, plan.seed, plan.policies), time.perf_counter())
                       for k in plan.settings}
            for k, (f, t0) in futures.items():
                done(k, f.result(), time.perf_counter() - t0)
    else:
        for k in plan.settings:
            t0 = time.perf_counter()
            done(k, run_setting(k, plan.queries, plan.seed, plan.policies), time.perf_counter() - t0)
    data["settings"] = [results[k] for k in plan.settings]
    data["summary"] = {e: summary([s for s in data["settings"] if s["engine"] == e]) for e in engines}
    data["dispatch_terms"] = {e: term_table(d) for e, d in decisions.items()}
    data["table1"] = [_table1(data["settings"], e, *plan.table1) for e in engines]
    ref = {(s["engine"], s["cluster"], s["workload"], s["rate"]): s["results"]["WB+PQ"]["min_slo_scale"]["0.95"]
           for s in data["settings"] if "WB+PQ" in s["results"]}
    console.print("α sensitivity, tuning time, capacity", highlight=False)
    data["sensitivity"] = [
        {"engine": e, "cluster": c, "workload": w, "rate": 0.5,
         "rows": sensitivity(make_setting(e, c, w, 0.5, plan.queries, plan.seed), plan.alphas,
                             ref.get((e, c, w, 0.5)) or 5.0)}
        for e, c, w in plan.sensitivity]
    data["tuning"] = [tuning_time(make_setting(*k, plan.queries, plan.seed), plan.window_s, ref.get(k) or 5.0)
                      for k in plan.tuning]
    data["capacity"] = {e: capacity_ratio(ENGINES[e]) for e in engines} if plan.capacity else {}
    data["wall_s"] = time.perf_counter() - t_start
    out.mkdir(parents=True, exist_ok=True)
    md = write_report(data, out)
    write_json(out / "bench-hexgen.json", data)
    console.print(md, highlight=False)
    console.print(f"report: {out / 'bench-hexgen.md'}\njson: {out / 'bench-hexgen.json'}")
    return data


def _table1(settings: Sequence[dict[str, Any]], engine: str, cluster: str, workload: str,
            rate: float) -> dict[str, Any] | None:
    for s in settings:
        if (s["engine"], s["cluster"], s["workload"], s["rate"]) == (engine, cluster, workload, rate):
            res = s["results"]
            return {"engine": engine, "cluster": cluster, "workload": workload, "rate": rate,
                    "before": res.get(BASELINE, {}).get("stage_mix"), "after": res.get("WB+PQ", {}).get("stage_mix")}
    return None
