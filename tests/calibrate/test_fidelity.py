"""The fidelity method's pieces that need no engine: mixed-iteration features, the
ablation steps, spreads and CPU pinning."""

import os

import numpy as np
import pytest

from flowserve.calibrate.fidelity import FULL, PREFILL_AS_LATENCY, ablation_profiles, scaled, split_cpus, spread
from flowserve.calibrate.profiler import EngineFacts, ProfileReport, mixed_features
from flowserve.profiles.fitted import FittedCostModel, Sample, fit_coefficients, iteration_features
from flowserve.profiles.slot_config import SlotConfig


def test_mixed_features_add_decoders_to_every_chunk_and_half_a_step():
    x = mixed_features(1, 100, 3000, 2048, 0)
    a1 = 2048 * 2049 / 2  # the first chunk attends to itself
    a2 = 952 * 2048 + 952 * 953 / 2  # the second to the first and itself
    assert np.allclose(x, [2.5, 2, 3000, a1 + a2, 2.5, 250])
    # a narrow prefill (< 64 rows) attends at the decode rate: A moves to the context term
    narrow = mixed_features(2, 10, 16, 2048, 64)
    assert np.allclose(narrow, [1.5, 1, 16, 0, 3, 30 + 16 * 17 / 2])


def test_ablation_steps_are_cumulative():
    coef = (1e-3, 2e-3, 1e-5, 1e-9, 1e-4, 1e-7)

    def t(x):
        return float(np.dot(x, coef))

    xs = [iteration_features(n, n * (n + 1) / 2, 0, 0.0) for n in (64, 256, 1024)]
    xs += [iteration_features(0, 0.0, b, b * c) for b, c in ((1, 500.0), (2, 100.0), (4, 900.0))]
    samples = [Sample("prefill", tuple(x), t(x)) for x in xs[:3]] + [Sample("decode", tuple(x), t(x)) for x in xs[3:]]
    mixed = mixed_features(1, 300, 512, 2048, 0)
    samples.append(Sample("mixed", tuple(mixed), 1.5 * t(mixed)))  # mixed runs slower than the pure model says
    full_coef, quality = fit_coefficients(samples)
    fitted = FittedCostModel("m", full_coef, 4096, 4096, 2, quality=quality, request_overhead_s=0.004,
                             slot_config=SlotConfig())
    report = ProfileReport(EngineFacts(2, 4096, 4096, 1000, "d"), samples, requests=[(64, 8, 0, 1.0)])
    steps = ablation_profiles(fitted, report)
    assert list(steps) == ["radix cache, pure shapes, no overhead", "+ request overhead",
                           "+ mixed iterations in the fit", FULL, PREFILL_AS_LATENCY]
    alt = steps[PREFILL_AS_LATENCY]
    assert alt.coefficients[1] == 0 and alt.request_overhead_s == 0.004 + full_coef[1]
    base = steps["radix cache, pure shapes, no overhead"]
    assert np.allclose(base.coefficients, coef, rtol=1e-3)  # the pure shapes alone recover the truth
    assert base.request_overhead_s == 0 and base.slot_config is None
    assert steps["+ request overhead"].request_overhead_s > 0.9  # 1 s measured vs a few ms modelled
    assert steps["+ mixed iterations in the fit"].coefficients == full_coef
    assert steps["+ mixed iterations in the fit"].slot_config is None and steps[FULL] is fitted
    vllm = ablation_profiles(FittedCostModel("m", full_coef, 4096, 4096, 2), report)
    assert FULL not in vllm and PREFILL_AS_LATENCY in vllm


def test_spread_and_cpu_split():
    assert spread([30.0, 10.0, 20.0]) == {"median": 20.0, "min": 10.0, "max": 30.0}
    engine, client = split_cpus()
    cpus = os.sched_getaffinity(0)
    if len(cpus) >= 2:
        assert int(engine) == min(cpus) and client == cpus - {min(cpus)}
    else:
        assert engine is None and client == cpus


def test_scaled_profile_is_slower_by_the_factor():
    m = FittedCostModel("m", (1e-3, 2e-3, 1e-5, 1e-9, 1e-4, 1e-7), 4096, 4096, 2, request_overhead_s=0.01)
    s = scaled(m, 2.5)
    assert s.call_time(512, 16) == pytest.approx(2.5 * m.call_time(512, 16))
    assert s.request_overhead_s == pytest.approx(0.025) and s.slots == 2
