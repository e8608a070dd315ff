"""Diagnostics for `bench hexgen`: where WB's decisions come from and what bounds the gains.

* `stage_mix` — paper Table 1: each instance's calls by Hexgen stage.
* `decision_terms` — per dispatch decision of hexgen_wb: the spread of each Eq. 4 term
  across the candidates, whether the compute term overrode the queue term, and whether
  the fastest GPU got the call; `term_table` pools them per stage.
* `capacity_ratio` — how much more an A100 instance completes than a slower one when
  saturated: round-robin's throughput is bounded by the slowest instance type, a
  balanced policy's by the sum, so with two fast and two slow instances the best
  throughput gain over round-robin is (1 + r) / 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from flowserve.config import load_cluster
from flowserve.metrics.summary import summarize
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import SimResult
from flowserve.workloads import load_workload
from flowserve.workloads.text2sql import PAPER_STAGE

Decision = tuple[str, float, float, bool, bool]  # stage, queue spread, compute spread, compute won, fastest


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


def decision_terms(log: Iterable[tuple[str, str, list[tuple[str, float, float]]]], alpha: float,
                   beta: float) -> list[Decision]:
    """For each logged decision: (stage, spread of (1−α)β/t_queue over busy candidates,
    spread of α·t_comp, chosen ≠ the best queue term, chosen is the fastest)."""
    out = []
    for stage, chosen, terms in log:
        by = {name: (tq, tc) for name, tq, tc in terms}
        best_queue = min(by, key=lambda n: by[n][0])
        fastest = min(tc for _, tc in by.values())
        busy = [1.0 / tq for tq, _ in by.values() if tq > 0]
        q_spread = (1 - alpha) * beta * (max(busy) - min(busy)) if len(busy) >= 2 else float("nan")
        tcs = [tc for _, tc in by.values()]
        out.append((stage, q_spread, alpha * (max(tcs) - min(tcs)),
                    by[chosen][0] > by[best_queue][0] + 1e-12, by[chosen][1] <= fastest + 1e-12))
    return out


def term_table(decisions: Sequence[Decision]) -> dict[str, dict[str, float]]:
    per: dict[str, list[Decision]] = {}
    for d in decisions:
        per.setdefault(d[0], []).append(d)
    out = {}
    for stage, ds in per.items():
        q = [d[1] for d in ds if not np.isnan(d[1])]
        out[stage] = {"decisions": len(ds), "median_queue_term_spread": float(np.median(q)) if q else None,
                      "median_compute_term_spread": float(np.median([d[2] for d in ds])),
                      "compute_term_won": float(np.mean([d[3] for d in ds])),
                      "to_fastest_gpu": float(np.mean([d[4] for d in ds]))}
    return out


def capacity_ratio(engine: Mapping[str, Any], workload: str = "text2sql-mixed", queries: int = 150,
                   rate: float = 2.0, seed: int = 0) -> dict[str, Any]:
    """Saturated throughput of four instances of each GPU type in Hetero-1/2 (same engine,
    same overloaded workload), relative to four A100s."""
    base = load_cluster("hetero-2", dict(engine) or None)
    wl = load_workload(workload, {"rate": rate, "queries": queries, "seed": seed})
    thr = {}
    for gpu in ("A100-80G", "A6000", "L40"):
        specs = tuple(replace(base[0], name=f"{gpu}-{i}", gpu=gpu) for i in range(4))
        thr[gpu] = summarize(simulate(specs, wl, PolicySpec("least_load", "fcfs"), record_calls=False))[
            "throughput_qps"]
    r = {g: thr["A100-80G"] / t for g, t in thr.items() if g != "A100-80G"}
    return {"throughput_qps": thr, "a100_over": r,
            # 2 A100 + 2 A6000 (Hetero-1): RR is bound by 4 × the A6000's share
            "hetero1_rr_bound_gain": (2 + 2 / r["A6000"]) / (4 / r["A6000"])}
