"""`flowserve bench hexgen`: the Hexgen-Text2SQL experiments (paper §5) in the simulator.

Hetero-1/2 × text2sql workloads (synthetic financial / formula1 / mixed, real CHESS
traces 1 and 2 replayed) × 0.5 and 1.0 q/s × five policy pairs; for each: minimum SLO
scale at 95% and 99% attainment, throughput, every ratio against RR+FCFS side by side.
Then the paper's Table 1 (stage mix per instance before/after WB), Fig. 5 (α
sensitivity), Table 3 (time of the full α sweep of a 100-s window), the measured β
calibration, and the same headline comparison with prefix caching off (the paper's
early-2025 vLLM baseline ran without it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from flowserve.bench.metrics import percentiles, summarize
from flowserve.bench.report import write_json
from flowserve.bench.scales import GRID, ScaleSearch
from flowserve.config import load_cluster
from flowserve.policies.hexgen import DEFAULT_ALPHA, DEFAULT_BETA, HexgenWB
from flowserve.sim.run import PolicySpec, check_fits, simulate, standalone_times
from flowserve.sim.simulator import SimResult
from flowserve.tune.alpha import SweepJob, sweep_alpha
from flowserve.types import InstanceSpec
from flowserve.workloads import load_workload
from flowserve.workloads.base import Workload
from flowserve.workloads.text2sql import PAPER_STAGE

BASELINE = "RR+FCFS"
POLICIES: dict[str, PolicySpec] = {
    "RR+FCFS": PolicySpec("round_robin", "fcfs"),
    "RR+PQ": PolicySpec("round_robin", "urgency"),
    "WB+FCFS": PolicySpec("hexgen_wb", "fcfs"),
    "WB+PQ": PolicySpec("hexgen_wb", "urgency"),
    "WB+PQ+online-α": PolicySpec("hexgen_wb", "urgency", {"alpha_tuning": True}),
}
WORKLOADS = ("text2sql-financial", "text2sql-formula1", "text2sql-mixed", "chess-trace1", "chess-trace2")
# The paper's Trace 1 (financial), Trace 2 (formula1), Trace 3 (both): here the real
# CHESS traces 1 and 2 and the synthetic mixed generator.
PAPER_TRACES = ("chess-trace1", "chess-trace2", "text2sql-mixed")
SENSITIVITY_ALPHAS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
# Engine settings (overrides of every instance's engine fields). "default": flowserve's
# defaults, like current vLLM/SGLang (prefix caching, 2048-token chunked-prefill budget).
# "vllm-0.6": what the paper's early-2025 vLLM baseline ran: no prefix caching, and the
# 512-token chunked-prefill budget vLLM 0.6 chose for long-context models such as
# Llama-3.1-70B (128k), so prompts wait for admission and the local queue order matters.
ENGINES: dict[str, dict[str, Any]] = {
    "default": {},
    "vllm-0.6": {"prefix_caching": False, "token_budget": 512},
}


@dataclass(frozen=True)
class Plan:
    engines: tuple[str, ...]
    clusters: tuple[str, ...]
    workloads: tuple[str, ...]
    rates: tuple[float, ...]
    queries: int
    policies: tuple[str, ...]
    sensitivity: tuple[tuple[str, str, str], ...]  # (engine, cluster, workload) at 0.5 q/s
    alphas: tuple[float, ...]
    tuning: tuple[tuple[str, str, str, float], ...]  # (engine, cluster, workload, rate)
    table1: tuple[str, str, float]  # (cluster, workload, rate), every engine
    seed: int = 0
    window_s: float = 100.0


FULL = Plan(
    engines=tuple(ENGINES), clusters=("hetero-1", "hetero-2"), workloads=WORKLOADS, rates=(0.5, 1.0),
    queries=200, policies=tuple(POLICIES),
    sensitivity=tuple((e, c, w) for e in ENGINES for c in ("hetero-1", "hetero-2") for w in PAPER_TRACES),
    alphas=SENSITIVITY_ALPHAS,
    tuning=tuple(("default", c, w, r) for c in ("hetero-1", "hetero-2") for w in PAPER_TRACES for r in (0.5, 1.0)),
    table1=("hetero-2", "text2sql-mixed", 0.5),
)
QUICK = Plan(
    engines=tuple(ENGINES), clusters=("hetero-1",), workloads=("text2sql-mixed",), rates=(1.0,), queries=60,
    policies=tuple(POLICIES), sensitivity=(("default", "hetero-1", "text2sql-mixed"),), alphas=(0.0, 0.5, 1.0),
    tuning=(("default", "hetero-1", "text2sql-mixed", 1.0),), table1=("hetero-1", "text2sql-mixed", 1.0),
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
    check_fits(wl, specs)
    return Setting(engine, cluster, workload, specs, wl, rate, standalone_times(wl, specs))


def stage_mix(result: SimResult) -> dict[str, dict[str, float]]:
    """Paper Table 1: per instance, the share of its calls from each of Hexgen's four stages."""
    counts: dict[str, dict[str, int]] = {i.name: {} for i in result.instances}
    for c in result.calls:
        st = PAPER_STAGE.get(c.stage, c.stage)
        counts[c.instance][st] = counts[c.instance].get(st, 0) + 1
    out = {}
    for inst, per in counts.items():
        total = sum(per.values()) or 1
        out[inst] = {st: n / total for st, n in per.items()}
    return out


def dispatch_terms(log: Sequence[tuple[str, str, list[tuple[str, float, float]]]],
                   alpha: float, beta: float) -> dict[str, dict[str, float]]:
    """Per stage: how often the compute term overrode the queue term (the chosen instance is
    not the least-queued one), the mean t_comp penalty (chosen − fastest) and the mean
    extra queued work (chosen − least queued)."""
    per: dict[str, list[tuple[float, float, float]]] = {}
    for stage, chosen, terms in log:
        by = {name: (tq, tc) for name, tq, tc in terms}
        tq_min = min(tq for tq, _ in by.values())
        tc_min = min(tc for _, tc in by.values())
        tq, tc = by[chosen]
        overrode = 1.0 if tq > tq_min + 1e-9 else 0.0
        per.setdefault(stage, []).append((overrode, tc - tc_min, tq - tq_min))
    return {st: {"decisions": len(v), "compute_term_won": float(np.mean([x[0] for x in v])),
                 "t_comp_penalty_s": float(np.mean([x[1] for x in v])),
                 "extra_t_queue_s": float(np.mean([x[2] for x in v]))}
            for st, v in per.items()}


def beta_spreads(log: Sequence[tuple[str, str, list[tuple[str, float, float]]]]) -> tuple[list[float], list[float]]:
    """Per decision with ≥ 2 busy candidates: max−min t_comp and max−min 1/t_queue."""
    dc, dq = [], []
    for _, _, terms in log:
        busy = [(tq, tc) for _, tq, tc in terms if tq > 0]
        if len(busy) >= 2:
            dc.append(max(tc for _, tc in busy) - min(tc for _, tc in busy))
            inv = [1 / tq for tq, _ in busy]
            dq.append(max(inv) - min(inv))
    return dc, dq


HINTS = {"RR+PQ": "RR+FCFS", "WB+PQ": "WB+FCFS", "WB+PQ+online-α": "WB+PQ"}


def run_policy(st: Setting, policy: PolicySpec, log: list | None = None,
               tick: Callable[[], None] | None = None,
               hint: dict[str, float | None] | None = None) -> tuple[dict[str, Any], SimResult]:
    """One policy on one setting: min SLO scales (deadline-aware: a search over the grid
    started at `hint`, a similar policy's scales), figures of the loosest run."""
    aware = policy.uses_deadline()
    top = GRID[-1]

    def run(scale: float | None) -> SimResult:
        disp = None
        if log is not None and (scale is None or scale == top):
            disp = HexgenWB(**{k: v for k, v in policy.dispatch_params.items() if k != "alpha_tuning"})
            disp.log = log
        res = simulate(st.specs, st.workload, policy, scale, st.standalone, dispatch=disp)
        if tick:
            tick()
        return res

    t0 = time.perf_counter()
    search = ScaleSearch(run, aware)
    hint = hint or {}
    loose = search.loosest()  # first, so an instrumented policy logs this run
    summary = search.summary(hint.get("0.95"), hint.get("0.99"))
    s = summarize(loose)
    summary.update({
        "throughput_qps": s["throughput_qps"], "latency_s": s["latency_s"],
        "token_hit_rate": s["token_hit_rate"], "failed": s["failed"],
        "instances": s["instances"], "stage_mix": stage_mix(loose),
        "wall_s": time.perf_counter() - t0,
        "alpha_changes": [dict(pc.params, time=pc.time) for pc in loose.policy_changes],
    })
    return summary, loose


def ratios(results: dict[str, dict[str, Any]], baseline: str = BASELINE) -> dict[str, dict[str, float | None]]:
    """Every policy against the baseline: min-scale ratios (baseline / policy: > 1 is
    better) and throughput ratio (policy / baseline)."""
    base = results[baseline]
    out = {}
    for label, r in results.items():
        out[label] = {
            "95": _ratio(base["min_slo_scale"]["0.95"], r["min_slo_scale"]["0.95"]),
            "99": _ratio(base["min_slo_scale"]["0.99"], r["min_slo_scale"]["0.99"]),
            "throughput": _ratio(r["throughput_qps"], base["throughput_qps"]),
        }
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def aggregate(settings: Sequence[dict[str, Any]], policy: str, against: str, key: str,
              rate: float | None = None, engine: str | None = None) -> dict[str, float | int | None]:
    """Average and maximum of one ratio over settings (ratios that are undefined are left out)."""
    vals = []
    for s in settings:
        if (rate is not None and s["rate"] != rate) or (engine is not None and s["engine"] != engine):
            continue
        res = s["results"]
        if policy not in res or against not in res:
            continue
        r = ratios(res, against)[policy][key]
        if r is not None:
            vals.append(r)
    if not vals:
        return {"avg": None, "max": None, "min": None, "n": 0}
    return {"avg": float(np.mean(vals)), "max": float(np.max(vals)), "min": float(np.min(vals)), "n": len(vals)}


def sensitivity(st: Setting, alphas: Sequence[float], scale: float,
                tick: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Fig. 5: WB+PQ under fixed α at one SLO scale: attainment, mean and p95 latency."""
    rows = []
    for a in alphas:
        res = simulate(st.specs, st.workload, PolicySpec("hexgen_wb", "urgency", {"alpha": a}), scale, st.standalone)
        lat = [q.latency for q in res.queries if q.failed is None]
        met = sum(1 for q in res.queries if q.met) / len(res.queries)
        rows.append({"alpha": a, "scale": scale, "attainment": met, "mean_s": float(np.mean(lat)),
                     "p95_s": float(np.percentile(lat, 95))})
        if tick:
            tick()
    return rows


def tuning_time(st: Setting, window_s: float, scale: float) -> dict[str, Any]:
    """Table 3: wall time of the full α sweep of the window's trace (the first `window_s`
    seconds of arrivals, deadlines at `scale`)."""
    keep = [i for i, q in enumerate(st.workload.queries) if q.arrival < window_s]
    wl = replace(st.workload, queries=tuple(st.workload.queries[i] for i in keep))
    job = SweepJob(wl, st.specs, None, tuple(scale * st.standalone[i] for i in keep), "urgency")
    t0 = time.perf_counter()
    res = sweep_alpha(job)
    wall = time.perf_counter() - t0
    return {"engine": st.engine, "cluster": st.cluster, "workload": st.ref, "rate": st.rate,
            "queries": res.queries,
            "calls": res.calls, "simulations": len(res.mean_latency), "wall_s": wall, "alpha": res.alpha,
            "mean_latency": {str(a): v for a, v in res.mean_latency.items()}}


def run_hexgen_bench(out: Path, quick: bool, queries: int | None, console: Console,
                     progress: Callable[[], Progress]) -> dict[str, Any]:
    from flowserve.bench.hexgen_report import write_report

    plan = QUICK if quick else FULL
    if queries is not None:
        plan = replace(plan, queries=queries)
    t_start = time.perf_counter()
    data: dict[str, Any] = {"bench": "hexgen", "quick": quick, "queries": plan.queries, "seed": plan.seed,
                            "alpha": DEFAULT_ALPHA, "beta": DEFAULT_BETA, "baseline": BASELINE,
                            "engines": {e: ENGINES[e] for e in plan.engines}, "grid": list(GRID), "settings": []}
    logs: list = []
    settings = [(e, c, w, r) for e in plan.engines for c in plan.clusters for w in plan.workloads
                for r in plan.rates]
    with progress() as bar:
        task = bar.add_task("settings", total=len(settings))
        for e, c, w, r in settings:
            st = make_setting(e, c, w, r, plan.queries, plan.seed)
            data["settings"].append(_setting(st, plan.policies, logs if e == "default" else None))
            bar.advance(task)
        dc, dq = beta_spreads(logs)
        data["beta_calibration"] = {
            "decisions": len(dc), "median_dt_comp_s": float(np.median(dc)) if dc else None,
            "median_d_inv_t_queue": float(np.median(dq)) if dq else None,
            "beta_balanced": float(np.median(dc) / np.median(dq)) if dc and np.median(dq) > 0 else None}
        ref = _reference_scales(data["settings"])
        task2 = bar.add_task("α sensitivity", total=len(plan.sensitivity) * len(plan.alphas))
        data["sensitivity"] = []
        for e, c, w in plan.sensitivity:
            st = make_setting(e, c, w, 0.5, plan.queries, plan.seed)
            scale = ref.get((e, c, w, 0.5), 5.0)
            data["sensitivity"].append({"engine": e, "cluster": c, "workload": w, "rate": 0.5,
                                        "rows": sensitivity(st, plan.alphas, scale, lambda: bar.advance(task2))})
        data["tuning"] = []
        for e, c, w, r in plan.tuning:
            st = make_setting(e, c, w, r, plan.queries, plan.seed)
            data["tuning"].append(tuning_time(st, plan.window_s, ref.get((e, c, w, r), 5.0)))
    data["table1"] = [_table1(data["settings"], e, *plan.table1) for e in plan.engines]
    data["summary"] = {e: _summary([s for s in data["settings"] if s["engine"] == e]) for e in plan.engines}
    data["wall_s"] = time.perf_counter() - t_start
    out.mkdir(parents=True, exist_ok=True)
    md = write_report(data, out)
    write_json(out / "bench-hexgen.json", data)
    console.print(md, highlight=False)
    console.print(f"report: {out / 'bench-hexgen.md'}\njson: {out / 'bench-hexgen.json'}")
    return data


def _setting(st: Setting, policies: Sequence[str], logs: list | None) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    diag = None
    for label in policies:
        policy = POLICIES[label]
        log: list | None = [] if (label in ("WB+FCFS", "WB+PQ")) else None
        hint = results.get(HINTS.get(label, ""), {}).get("min_slo_scale")
        results[label], _ = run_policy(st, policy, log, None, hint)
        if log is not None and label == "WB+PQ":
            diag = dispatch_terms(log, DEFAULT_ALPHA, DEFAULT_BETA)
        if log is not None and label == "WB+FCFS" and logs is not None:
            logs.extend(log)
    return {"engine": st.engine, "cluster": st.cluster, "workload": st.ref, "rate": st.rate, "key": st.key,
            "calls": st.workload.calls,
            "standalone_s": percentiles(st.standalone), "results": results,
            "ratios": ratios(results) if BASELINE in results else {}, "wb_terms": diag}


def _reference_scales(settings: Sequence[dict[str, Any]]) -> dict[tuple[str, str, float], float]:
    """Per setting, WB+PQ's 95% minimum scale: where α sensitivity and tuning are measured."""
    out = {}
    for s in settings:
        wbpq = s["results"].get("WB+PQ")
        if wbpq and wbpq["min_slo_scale"]["0.95"] is not None:
            out[(s["engine"], s["cluster"], s["workload"], s["rate"])] = float(wbpq["min_slo_scale"]["0.95"])
    return out


def _table1(settings: Sequence[dict[str, Any]], engine: str, cluster: str, workload: str,
            rate: float) -> dict[str, Any] | None:
    for s in settings:
        if (s["engine"], s["cluster"], s["workload"], s["rate"]) == (engine, cluster, workload, rate):
            res = s["results"]
            return {"engine": engine, "cluster": cluster, "workload": s["workload"], "rate": rate,
                    "before": res.get(BASELINE, {}).get("stage_mix"), "after": res.get("WB+PQ", {}).get("stage_mix")}
    return None


def _summary(settings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in POLICIES:
        if policy == BASELINE:
            continue
        out[policy] = {k: aggregate(settings, policy, BASELINE, k) for k in ("95", "99")}
        out[policy]["throughput@1.0"] = aggregate(settings, policy, BASELINE, "throughput", rate=1.0)
    out["ablation"] = {"WB+PQ vs RR+PQ": {k: aggregate(settings, "WB+PQ", "RR+PQ", k) for k in ("95", "99")},
                       "WB+PQ vs WB+FCFS": {k: aggregate(settings, "WB+PQ", "WB+FCFS", k) for k in ("95", "99")}}
    return out
