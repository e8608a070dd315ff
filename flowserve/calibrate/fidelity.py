"""Simulator fidelity against a real engine, measured robustly on a noisy shared machine.

Method (`repeated_validation`): the engine runs pinned to its own CPUs (`taskset`, see
`LlamaServer(cpus=)`), the measuring process to the others (`pin_self`); the engine is
warmed up (`validate_engine` sends two long requests first); the same workload is
replayed `repeats` times with fresh token ids, and each run's mean per-query latency
error is reported with the median and the spread (min–max) over runs, next to the 1-minute
load average before and after each run.

The ablation (`ablation_profiles`) replays nothing more: every run's live latencies are
compared with the simulator under each step of the engine model, added one at a time
(fit without mixed iterations and no per-request overhead, then overhead, then mixed
iterations in the fit, then llama-server's slot model), plus one alternative: the fitted
fixed prefill cost taken as per-request latency rather than engine time.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flowserve.calibrate.profiler import ProfileReport, request_overhead
from flowserve.calibrate.validate import validate_engine
from flowserve.profiles.fitted import FittedCostModel, fit_coefficients
from flowserve.sim.run import PolicySpec
from flowserve.workloads.base import Workload

FULL = "+ slot model (full)"
PREFILL_AS_LATENCY = "full, c_prefill as request latency (alternative)"


def ablation_profiles(fitted: FittedCostModel, report: ProfileReport) -> dict[str, FittedCostModel]:
    """Cumulative steps from the old engine model to `fitted`, by name (last = `fitted`)."""
    pure = [s for s in report.samples if s.kind != "mixed"]
    coef, quality = fit_coefficients(pure) if len(pure) >= 2 else (fitted.coefficients, fitted.quality)
    base = dataclasses.replace(fitted, coefficients=coef, quality=quality, request_overhead_s=0.0, slot_config=None)
    with_overhead = dataclasses.replace(base, request_overhead_s=request_overhead(base, report.requests))
    with_mixed = dataclasses.replace(fitted, slot_config=None)
    steps = {"radix cache, pure shapes, no overhead": base, "+ request overhead": with_overhead,
             "+ mixed iterations in the fit": with_mixed}
    if fitted.slot_config is not None:
        steps[FULL] = fitted
    # an alternative, not a step: the fixed cost of a prefill as latency outside the engine
    # (a server front end that handles requests while the engine iterates) instead of time
    # every iteration with a prefill occupies the engine
    c = fitted.coefficients
    steps[PREFILL_AS_LATENCY] = dataclasses.replace(
        fitted, coefficients=(c[0], 0.0, *c[2:]), request_overhead_s=fitted.request_overhead_s + c[1])
    return steps


def pin_self(cpus: set[int]) -> set[int] | None:
    """Pin this process to `cpus` (where the OS allows); returns the previous set."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    usable = cpus & before
    if usable:
        os.sched_setaffinity(0, usable)
    return before


def split_cpus() -> tuple[str | None, set[int]]:
    """(taskset list for the engine, CPUs for this process): the first CPU for the engine
    and the rest for the client; None and all CPUs on a single-CPU machine."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if len(cpus) < 2:
        return None, set(cpus)
    return str(cpus[0]), set(cpus[1:])


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values))}


async def repeated_validation(url: str, profile: Path, workload: Workload, policy: PolicySpec,
                              variants: Mapping[str, FittedCostModel], repeats: int = 3,
                              salt: int = 0, vocab_size: int | None = None) -> dict[str, Any]:
    """`repeats` validate runs (fresh token ids each) with the ablation; median and spread."""
    assert repeats >= 1
    runs = [await validate_engine(url, profile, workload, policy, salt=salt + 1000 * r, vocab_size=vocab_size,
                                  variants=variants) for r in range(repeats)]
    per_variant = {name: [run["ablation"][name]["latency_error_pct"]["mean"] for run in runs]
                   for name in variants}
    return {
        "repeats": repeats,
        "runs": [{"latency_error_pct": r["latency_error_pct"], "mean_latency_s": r["mean_latency_s"],
                  "token_hit_rate": r["token_hit_rate"], "load_average_1m": r["load_average_1m"],
                  "ablation": {k: v["latency_error_pct"]["mean"] for k, v in r["ablation"].items()}}
                 for r in runs],
        "mean_error_pct": spread([r["latency_error_pct"]["mean"] for r in runs]),
        "ablation_mean_error_pct": {k: spread(v) for k, v in per_variant.items() if None not in v},
        "token_hit_rate": {"live": spread([r["token_hit_rate"]["live"] for r in runs]),
                           "sim": spread([r["token_hit_rate"]["sim"] for r in runs])},
        "load_average_1m": spread([x for r in runs for x in r["load_average_1m"].values()]),
        "goal_mean_abs_pct": 10.0,
    }
