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

On a machine whose CPUs other jobs share, the engine's speed changes between the profile
and the run; each run is therefore bracketed by a speed probe (a fresh 512-token prompt,
16 output tokens) and also reported against the full profile scaled by the probe's
measured / predicted time (`SPEED_NORMALISED`, with the factor in the report): the error
of the engine model once the machine's current speed is known.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flowserve.calibrate.profiler import ProfileReport, request_overhead
from flowserve.calibrate.validate import engine_instance, sim_errors, summary, validate_engine, vocab_size_of
from flowserve.engines.client import EngineClient
from flowserve.graph.plan import Segment
from flowserve.profiles.fitted import FittedCostModel, fit_coefficients, load_profile
from flowserve.sim.run import PolicySpec
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.workloads.base import Workload

FULL = "+ slot model (full)"
PREFILL_AS_LATENCY = "full, c_prefill as request latency (alternative)"
SPEED_NORMALISED = "full, scaled to the engine's probed speed"


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


PROBE = (512, 16)  # prompt tokens, output tokens of the speed probe


async def speed_probe(url: str, vocab: int, salt: int, repeats: int = 3) -> float:
    """Median wall time of a fresh `PROBE` request (nothing cached), timed by the client."""
    mat = TokenMaterializer(vocab, salt + 2_000_003)
    times = []
    async with EngineClient(url) as c:
        for k in range(repeats):
            prompt = list(mat.segment(Segment(k + 1, PROBE[0])))
            t0 = time.monotonic()
            await c.complete(prompt, PROBE[1], ignore_eos=True, cache_prompt=False)
            times.append(time.monotonic() - t0)
    return float(statistics.median(times))


def scaled(model: FittedCostModel, factor: float) -> FittedCostModel:
    """The profile on an engine `factor` times slower (a busier CPU share)."""
    assert factor > 0
    return dataclasses.replace(model, coefficients=tuple(c * factor for c in model.coefficients),
                               request_overhead_s=model.request_overhead_s * factor)


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": float(statistics.median(values)), "min": float(min(values)), "max": float(max(values))}


async def repeated_validation(url: str, profile: Path, workload: Workload, policy: PolicySpec,
                              variants: Mapping[str, FittedCostModel], repeats: int = 3,
                              salt: int = 0, vocab_size: int | None = None) -> dict[str, Any]:
    """`repeats` validate runs (fresh token ids each) with the ablation; median and spread.
    Each run is bracketed by speed probes: their mean over the full profile's prediction of
    the probe is the run's slow-down, and the full profile scaled by it is one more variant
    (`SPEED_NORMALISED`): what the simulator predicts once told the engine's current speed."""
    assert repeats >= 1
    vocab = vocab_size or await vocab_size_of(url)
    full = variants[FULL] if FULL in variants else load_profile(profile)
    predicted = full.call_time(*PROBE) + full.request_overhead_s
    runs, factors = [], []
    for r in range(repeats):
        before = await speed_probe(url, vocab, salt + 1000 * r)
        # the probe before the run is also part of its warm-up; the one after closes the bracket
        run = await validate_engine(url, profile, workload, policy, salt=salt + 1000 * r, vocab_size=vocab,
                                    variants=variants)
        after = await speed_probe(url, vocab, salt + 1000 * r + 500)
        factor = (before + after) / 2 / predicted
        errs, _, _ = sim_errors(engine_instance(url, profile), workload, policy, _live(run), scaled(full, factor))
        run["ablation"][SPEED_NORMALISED] = {"latency_error_pct": summary(errs)}
        run["speed_factor"] = {"probe_before_s": before, "probe_after_s": after, "predicted_s": predicted,
                               "factor": factor}
        runs.append(run)
        factors.append(factor)
    per_variant = {name: [run["ablation"][name]["latency_error_pct"]["mean"] for run in runs]
                   for name in [*variants, SPEED_NORMALISED]}
    return {
        "repeats": repeats,
        "runs": [{"latency_error_pct": r["latency_error_pct"], "mean_latency_s": r["mean_latency_s"],
                  "token_hit_rate": r["token_hit_rate"], "load_average_1m": r["load_average_1m"],
                  "ablation": {k: v["latency_error_pct"]["mean"] for k, v in r["ablation"].items()},
                  "speed_factor": r["speed_factor"]}
                 for r in runs],
        "mean_error_pct": spread([r["latency_error_pct"]["mean"] for r in runs]),
        "ablation_mean_error_pct": {k: spread(v) for k, v in per_variant.items() if None not in v},
        "token_hit_rate": {"live": spread([r["token_hit_rate"]["live"] for r in runs]),
                           "sim": spread([r["token_hit_rate"]["sim"] for r in runs])},
        "load_average_1m": spread([x for r in runs for x in r["load_average_1m"].values()]),
        "speed_factor": spread(factors),
        "goal_mean_abs_pct": 10.0,
    }


def _live(run: dict[str, Any]) -> dict[int, float]:
    return {q["query"]: q["live_s"] for q in run["per_query"]}
