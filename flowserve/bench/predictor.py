"""`flowserve bench predictor`: the latency predictor's candidate models side by side —
accuracy of the TTFT and TPOT they predict, and what a prediction and an update cost.

The stream: one simulation of `bench slo`'s requests on `hetero-3` under `flowserve_slo`
with analytic predictions records, for every finished call, the features it had at
dispatch on its instance and what the analytic estimate missed of its measured TTFT and
TPOT (the residual the learned models learn). Each candidate then replays the stream in
order, as the dispatch would meet it — one model per hardware profile; each call first
predicted (once its profile's model has learned `warmup` calls), then learned — and is
scored on the calls every candidate predicted: mean absolute error of TTFT and TPOT, and
microseconds per prediction (one feature vector: one candidate of a decision) and per
update. `analytic` predicts no residual: the cost model alone. Timings depend on the
machine's load (the 1-minute load average is reported); errors do not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from rich.console import Console

from flowserve.bench.slo import CLUSTER, RATE, slo_workload
from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.policies.slo.dispatch import SLOAwareDispatch
from flowserve.policies.slo.predictor import Latency
from flowserve.sim.run import PolicySpec, simulate

CANDIDATES = ("analytic", "sgd", "river", "lightgbm")
WARMUP = 32
Sample = tuple[Hashable, tuple[float, ...], float, float | None]


class StreamRecorder:
    """A latency-model factory whose models record what they are taught, in order, and predict nothing."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def __call__(self, seed: int) -> Any:
        return _Recording(self.samples, seed)


class _Recording:
    def __init__(self, sink: list[Sample], group: int) -> None:
        self._sink = sink
        self._group = group
        self.samples = 0

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.samples += 1
        self._sink.append((self._group, tuple(x), ttft_s, tpot_s))

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        return [(0.0, 0.0)] * len(xs)


def record_stream(queries: int, seed: int) -> list[Sample]:
    recorder = StreamRecorder()
    policy = SLOAwareDispatch(model=cast(str, recorder), warmup=1 << 30)  # predictions stay analytic
    simulate(list(BUILTIN_CLUSTERS[CLUSTER]), slo_workload(queries, RATE, seed),
             PolicySpec("flowserve_slo", "flowserve"), dispatch=policy, record_calls=False)
    return recorder.samples


def replay(name: str, stream: list[Sample], seed: int) -> dict[str, Any]:
    """Prequential errors (per sample: predicted before learned) and costs of one candidate."""
    if name == "analytic":
        factory = None
    else:
        from flowserve.predict.latency_models import LATENCY_MODELS

        factory = LATENCY_MODELS[name]
    models: dict[Hashable, Any] = {}
    errors: dict[int, tuple[float, float | None]] = {}
    predict_s = learn_s = 0.0
    predicts = 0
    for k, (group, x, ttft, tpot) in enumerate(stream):
        model = models.get(group)
        if model is None and factory is not None:
            model = models[group] = factory(seed + len(models))
        if model is not None and model.samples >= WARMUP:
            t0 = time.perf_counter()
            [(p_ttft, p_tpot)] = model.predict([x])
            predict_s += time.perf_counter() - t0
            predicts += 1
        else:
            p_ttft = p_tpot = 0.0
        errors[k] = (abs(p_ttft - ttft), None if tpot is None else abs(p_tpot - tpot))
        if model is not None:
            t0 = time.perf_counter()
            model.learn(x, ttft, tpot)
            learn_s += time.perf_counter() - t0
    return {"errors": errors, "predict_us": 1e6 * predict_s / predicts if predicts else 0.0,
            "learn_us": 1e6 * learn_s / len(stream) if factory is not None else 0.0}


def scored(stream: list[Sample]) -> list[int]:
    """The samples every candidate predicted: those after the first `WARMUP` of their group."""
    seen: dict[Hashable, int] = {}
    out = []
    for k, (group, *_rest) in enumerate(stream):
        seen[group] = seen.get(group, 0) + 1
        if seen[group] > WARMUP:
            out.append(k)
    return out


def run_predictor_bench(out: Path, quick: bool, console: Console, seed: int = 5,
                        candidates: tuple[str, ...] = CANDIDATES) -> dict[str, Any]:
    stream = record_stream(300 if quick else 1200, seed)
    keep = scored(stream)
    rows = []
    for name in candidates:
        try:
            r = replay(name, stream, seed)
        except ImportError as e:
            console.print(f"  {name}: not installed ({e})")
            continue
        ttft = [r["errors"][k][0] for k in keep]
        tpot = [e for k in keep if (e := r["errors"][k][1]) is not None]
        rows.append({"model": name, "ttft_mae_ms": 1000 * float(np.mean(ttft)),
                     "ttft_p90_err_ms": 1000 * float(np.percentile(ttft, 90)),
                     "tpot_mae_ms": 1000 * float(np.mean(tpot)), "predict_us": r["predict_us"],
                     "learn_us": r["learn_us"]})
    load = os.getloadavg()[0]
    table = markdown_table(["model", "TTFT MAE ms", "TTFT p90 error ms", "TPOT MAE ms", "µs/prediction",
                            "µs/update"],
                           [[r["model"], r["ttft_mae_ms"], r["ttft_p90_err_ms"], r["tpot_mae_ms"], r["predict_us"],
                             r["learn_us"]] for r in rows])
    console.print(f"\nLatency predictor candidates on {len(keep)} of {len(stream)} calls ({CLUSTER}, seed {seed}; "
                  f"load average {load:.2f}):\n")
    console.print(table)
    report = {"cluster": CLUSTER, "seed": seed, "calls": len(stream), "scored": len(keep), "warmup": WARMUP,
              "load_average": load, "rows": rows, "table": table}
    write_json(out / "predictor.json", report)
    return report
