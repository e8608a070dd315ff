"""`flowserve bench slo`: per-request TTFT/TPOT objectives on a heterogeneous pool — the share
of requests meeting both, for flowserve with its learned latency predictor, flowserve
without it, and llm-d's predicted-latency scheduling, side by side on the same arrivals.

The cluster is `hetero-3` (Llama-3.1-8B on H100, A100-80G, 2 × L40S, 2 × L4: four GPU
types). The requests are single-call chats (`chat_workload`) whose objectives are drawn
from three classes (`CLASSES`): tight (TTFT 0.5 s, TPOT 30 ms), standard (2 s, 80 ms) and
relaxed (6 s, 200 ms, priority −1: sheddable). A request meets its objectives when its
call's TTFT (first token − arrival) and TPOT (mean gap between output tokens) both do; a
shed request meets nothing. Simulated in virtual time: the shares do not depend on the
machine's load; the wall seconds per simulation do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.metrics.summary import latency_slo_attainment, percentiles
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import SimResult
from flowserve.types.work import LatencySLO
from flowserve.workloads.latency_slos import SLOClass, chat_workload, with_latency_slos

SEEDS = (31, 37, 41, 43, 47)  # never tuned on (development used seeds 5 and 6)
CLUSTER = "hetero-3"
RATE = 60.0  # requests per second: near the pool's capacity (~62/s of these requests, compute-bound)
CLASSES = (
    SLOClass(0.3, LatencySLO(0.5, 0.030)),
    SLOClass(0.4, LatencySLO(2.0, 0.080)),
    SLOClass(0.3, LatencySLO(6.0, 0.200), priority=-1),
)
FLOWSERVE, WITHOUT, LLMD = "flowserve", "flowserve without the predictor", "llm-d predicted latency"
CONTESTANTS: dict[str, PolicySpec] = {
    FLOWSERVE: PolicySpec("flowserve_slo", "flowserve"),
    "flowserve, analytic predictions": PolicySpec("flowserve_slo", "flowserve", {"model": "analytic"}),
    WITHOUT: PolicySpec("flowserve", "flowserve"),
    LLMD: PolicySpec("llmd_slo", "fcfs"),
}


def slo_workload(queries: int, rate: float, seed: int) -> Any:
    return with_latency_slos(chat_workload(queries, rate, seed), CLASSES, seed + 1)


def run_row(name: str, spec: PolicySpec, queries: int, rate: float, seed: int) -> dict[str, Any]:
    """One contestant on one seed's requests: the share meeting both objectives and the rest."""
    result: SimResult = simulate(list(BUILTIN_CLUSTERS[CLUSTER]), slo_workload(queries, rate, seed), spec)
    slo = latency_slo_attainment(result)
    calls = result.calls
    ttft = [c.first_token - c.ready for c in calls if c.first_token is not None]
    tpot = [(c.finished - c.first_token) / (c.output_tokens - 1) for c in calls
            if c.first_token is not None and c.output_tokens > 1]
    return {"contestant": name, "policy": spec.describe(), "seed": seed, "requests": slo["requests"],
            "share_met": slo["share_met"], "shed_share": slo["shed_share"],
            "ttft_p90_s": percentiles(ttft)["p90"], "tpot_p90_s": percentiles(tpot)["p90"],
            "sim_wall_s": result.sim_wall_s, "stats": dict(result.policy_stats)}


def run_slo_bench(out: Path, quick: bool, console: Console, seeds: tuple[int, ...] = SEEDS,
                  contestants: tuple[str, ...] = tuple(CONTESTANTS), rate: float = RATE,
                  queries: int | None = None) -> dict[str, Any]:
    queries = queries or (300 if quick else 1200)
    seeds = seeds[:2] if quick else seeds
    rows = []
    for seed in seeds:
        for name in contestants:
            row = run_row(name, CONTESTANTS[name], queries, rate, seed)
            rows.append(row)
            console.print(f"  seed {seed} {name}: {row['share_met']:.3f} met, {row['shed_share']:.3f} shed "
                          f"({row['sim_wall_s']:.1f} s)")
    summary = {name: summarise([r for r in rows if r["contestant"] == name]) for name in contestants}
    ratios = {}
    for other in (LLMD, WITHOUT):
        if FLOWSERVE in contestants and other in contestants:
            per_seed = [a["share_met"] / b["share_met"] if b["share_met"] else float("inf")
                        for a, b in zip([r for r in rows if r["contestant"] == FLOWSERVE],
                                        [r for r in rows if r["contestant"] == other], strict=True)]
            ratios[other] = {"mean_of_means": summary[FLOWSERVE]["mean"] / summary[other]["mean"]
                             if summary[other]["mean"] else float("inf"),
                             "per_seed": per_seed, "min": min(per_seed)}
    table = markdown_table(
        ["contestant", *[f"seed {s}" for s in seeds], "mean", "shed", "TTFT p90 s", "TPOT p90 ms", "wall s/sim"],
        [[name, *[r["share_met"] for r in rows if r["contestant"] == name], summary[name]["mean"],
          summary[name]["shed"], summary[name]["ttft_p90_s"], summary[name]["tpot_p90_ms"],
          summary[name]["wall_s"]] for name in contestants])
    console.print(f"\nShare of requests meeting both TTFT and TPOT objectives ({CLUSTER}, {queries} requests at "
                  f"{rate:g}/s per seed):\n")
    console.print(table)
    for other, r in ratios.items():
        console.print(f"flowserve / {other}: ×{r['mean_of_means']:.2f} (seeds: "
                      + ", ".join(f"×{x:.2f}" for x in r["per_seed"]) + ")")
    report = {"cluster": CLUSTER, "queries": queries, "rate": rate, "seeds": list(seeds),
              "classes": [{"share": c.share, "ttft_s": c.slo.ttft_s, "tpot_s": c.slo.tpot_s, "priority": c.priority}
                          for c in CLASSES],
              "rows": rows, "summary": summary, "ratios": ratios, "table": table}
    write_json(out / "slo.json", report)
    return report


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in rows if r[key] is not None]))

    return {"mean": mean("share_met"), "min": min(r["share_met"] for r in rows), "shed": mean("shed_share"),
            "ttft_p90_s": mean("ttft_p90_s"), "tpot_p90_ms": 1000 * mean("tpot_p90_s"), "wall_s": mean("sim_wall_s")}
