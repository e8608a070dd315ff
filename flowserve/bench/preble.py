"""`flowserve bench preble`: Preble's evaluation (§5.3–5.4) in the simulator.

Both Preble clusters × the five workloads × Preble Fig. 10's ablation stack, each run
side by side on the same generated workload. Request latency is per LLM call (Preble
measures requests): from the call becoming ready to its last token, queueing included.
Rates are chosen per workload so that round-robin is loaded (as in Preble's Fig. 7,
which compares at the loads where systems differ); runs last at least a window H where
the full bench allows, so rebalancing and replication have their window to act.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.config import load_cluster
from flowserve.metrics.tables import fmt, markdown_table, ratio, write_json
from flowserve.profiles.instance import max_context
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import SimResult
from flowserve.workloads import load_workload

E2_ALONE = {"rebalance": False, "replicate": False, "pd_balance": False}
E2_BALANCED = {"rebalance": True, "replicate": True, "pd_balance": False}
E2_ALL = {"rebalance": True, "replicate": True, "pd_balance": True}
POLICIES: dict[str, PolicySpec] = {
    "round_robin": PolicySpec("round_robin"),
    "least_load": PolicySpec("least_load"),
    "E2": PolicySpec("preble_e2", dispatch_params=E2_ALONE),
    "+rebalance/replication": PolicySpec("preble_e2", dispatch_params=E2_BALANCED),
    "+P/D balance": PolicySpec("preble_e2", dispatch_params=E2_ALL),
    "+priority groups": PolicySpec("preble_e2", "prefix_groups", dispatch_params=E2_ALL),
}
BASELINE = "round_robin"
CLUSTERS = {"preble-a6000": "4×A6000, Mistral-7B", "preble-h100": "8×H100, Llama-3-70B (TP 4, 2 instances)"}
# Queries per second (episodes, problems) and virtual seconds of arrivals (full, quick).
# `mixed` (tool use + video QA, bursty arrivals) mixes decode-heavy and prefill-heavy
# requests: the workload where P/D balancing has imbalance to act on.
RATES: dict[str, dict[str, float]] = {
    "preble-a6000": {"tool_use": 40, "embodied_agent": 6, "programming": 1.0, "video_qa": 3, "long_doc_qa": 1,
                     "mixed": 8},
    "preble-h100": {"tool_use": 40, "embodied_agent": 10, "programming": 2.0, "video_qa": 12, "long_doc_qa": 9,
                    "mixed": 20},
}
DURATION_S = {"full": 240.0, "quick": 30.0}
MAX_REQUESTS = {"full": 4_000, "quick": 1_200}
CALLS_PER_QUERY = {"embodied_agent": 19, "programming": 8}  # the generators' means


@dataclass(frozen=True)
class PrebleCase:
    cluster: str
    kind: str
    rate: float
    queries: int


def cases(quick: bool, clusters: Sequence[str], kinds: Sequence[str]) -> list[PrebleCase]:
    mode = "quick" if quick else "full"
    out = []
    for c in clusters:
        for k in kinds:
            rate = RATES[c][k]
            cap = MAX_REQUESTS[mode] // CALLS_PER_QUERY.get(k, 1)
            out.append(PrebleCase(c, k, rate, int(min(cap, max(50, rate * DURATION_S[mode])))))
    return out


def run_metrics(res: SimResult) -> dict[str, Any]:
    calls = res.calls
    lat = np.array([c.finished - c.ready for c in calls])
    ttft = np.array([c.first_token - c.ready for c in calls if c.first_token is not None])
    tpot = np.array([(c.finished - c.first_token) / (c.output_tokens - 1) for c in calls
                     if c.first_token is not None and c.output_tokens > 1])
    qlat = np.array([q.latency for q in res.queries if q.failed is None])
    prompt = sum(c.input_tokens for c in calls)
    return {
        "requests": len(calls),
        "queries": len(res.queries),
        "failed": sum(1 for q in res.queries if q.failed is not None),
        "latency_mean_s": float(lat.mean()), "latency_p99_s": float(np.percentile(lat, 99)),
        "ttft_mean_s": float(ttft.mean()), "ttft_p99_s": float(np.percentile(ttft, 99)),
        "tpot_mean_s": float(tpot.mean()) if len(tpot) else None,
        "query_latency_mean_s": float(qlat.mean()) if len(qlat) else None,
        "token_hit_rate": sum(c.cached_tokens for c in calls) / prompt if prompt else 0.0,
        "utilization": [round(i.busy_s / max(res.makespan, 1e-9), 3) for i in res.instances],
        "preemptions": sum(i.preemptions for i in res.instances),
        "policy_stats": res.policy_stats,
        "sim_wall_s": res.sim_wall_s,
    }


def run_case(case: PrebleCase, policies: dict[str, PolicySpec], seed: int = 0) -> dict[str, Any]:
    specs = load_cluster(case.cluster)
    wl = load_workload(case.kind, {"queries": case.queries, "rate": case.rate, "seed": seed},
                       min(max_context(s) for s in specs))
    runs = {label: run_metrics(simulate(specs, wl, p, record_calls=True)) for label, p in policies.items()}
    base = runs[BASELINE]
    for r in runs.values():
        r["mean_gain"] = ratio(base["latency_mean_s"], r["latency_mean_s"])
        r["p99_gain"] = ratio(base["latency_p99_s"], r["latency_p99_s"])
    return {"cluster": case.cluster, "workload": case.kind, "rate": case.rate, "queries": case.queries,
            "requests": base["requests"], "runs": runs}


def moves(stats: dict[str, int]) -> str:
    """E2's post-assignment moves of a run: rebalanced / P/D-balanced / replicated requests."""
    if "exploit" not in stats:
        return "—"
    return f"{stats.get('rebalanced', 0)} / {stats.get('pd_balanced', 0)} / {stats.get('replicated', 0)}"


def case_table(result: dict[str, Any]) -> str:
    rows = []
    for label, r in result["runs"].items():
        rows.append([label, r["latency_mean_s"], r["latency_p99_s"], r["ttft_mean_s"], r["ttft_p99_s"],
                     None if r["tpot_mean_s"] is None else 1000 * r["tpot_mean_s"], r["token_hit_rate"],
                     r["mean_gain"], r["p99_gain"], moves(r["policy_stats"])])
    return markdown_table(["policy", "mean s", "p99 s", "TTFT s", "TTFT p99 s", "TPOT ms", "hit rate",
                           "mean ×RR", "p99 ×RR", "rebal. / P/D / repl."], rows)


def summary_table(results: Sequence[dict[str, Any]], label: str) -> str:
    rows = [[r["cluster"], r["workload"], r["rate"], r["requests"], r["runs"][label]["mean_gain"],
             r["runs"][label]["p99_gain"], r["runs"][BASELINE]["token_hit_rate"],
             r["runs"][label]["token_hit_rate"]] for r in results]
    return markdown_table(["cluster", "workload", "q/s", "requests", "mean ×RR", "p99 ×RR", "RR hit",
                           "E2 hit"], rows)


def plot(results: Sequence[dict[str, Any]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    labels = [k for k in POLICIES if k != BASELINE]
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True)
    names = [f"{r['workload']}\n{r['cluster'].removeprefix('preble-')}" for r in results]
    width = 0.8 / len(labels)
    for ax, key in zip(axes, ("mean_gain", "p99_gain"), strict=True):
        for k, label in enumerate(labels):
            vals = [r["runs"][label][key] or 0 for r in results]
            ax.bar(np.arange(len(results)) + k * width, vals, width, label=label)
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_ylabel(("mean" if key == "mean_gain" else "p99") + " latency gain ×RR")
        ax.set_yscale("log")
    axes[1].set_xticks(np.arange(len(results)) + 0.4 - width / 2, names, fontsize=7)
    axes[0].legend(fontsize=7, ncol=3)
    axes[0].set_title("Preble ablation stack vs round-robin (higher is better)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_preble_bench(out: Path, quick: bool, console: Console, clusters: Sequence[str] | None = None,
                     kinds: Sequence[str] | None = None,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    todo = cases(quick, clusters or list(CLUSTERS), kinds or list(RATES[next(iter(CLUSTERS))]))
    results = []
    t0 = time.perf_counter()
    for case in todo:
        res = run_case(case, POLICIES)
        results.append(res)
        console.print(f"\n### {case.kind} on {case.cluster} ({CLUSTERS[case.cluster]}), "
                      f"{case.rate} q/s, {res['requests']} requests", highlight=False)
        console.print(case_table(res), highlight=False)
        if progress:
            progress(case.kind)
    wall = time.perf_counter() - t0
    best = "+priority groups"
    summary = summary_table(results, best)
    console.print(f"\nFull Preble stack ({best}) vs round-robin (paper: 1.5–14.5× mean, 2–10× p99):",
                  highlight=False)
    console.print(summary, highlight=False)
    console.print(f"bench wall time {wall:.0f} s", highlight=False)
    data = {"bench": "preble", "quick": quick, "baseline": BASELINE, "paper_mean_gain": [1.5, 14.5],
            "paper_p99_gain": [2, 10], "wall_s": wall, "results": results}
    js = write_json(out / "bench-preble.json", data)
    md = "\n\n".join(
        [f"## Preble bench ({'quick' if quick else 'full'})", summary]
        + [f"### {r['workload']} on {r['cluster']} ({r['rate']} q/s, {r['requests']} requests)\n\n"
           + case_table(r) for r in results])
    (out / "bench-preble.md").write_text(md + "\n")
    png = plot(results, out / "bench-preble.png")
    console.print(f"json: {js}\ntable: {out / 'bench-preble.md'}\nplot: {png}  ({fmt(wall, 0)} s)")
    return data
