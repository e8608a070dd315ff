"""The learned latency models: each learns a latency that depends linearly on the features,
predicts it after learning, and is the same for the same seed."""

from __future__ import annotations

import numpy as np
import pytest

from flowserve.predict.latency_models import LATENCY_MODELS


def stream(n: int, seed: int = 0) -> list[tuple[tuple[float, ...], float, float | None]]:
    """TTFT = 0.05 + 2·x0 + x3, TPOT = 0.01 + x4 (x4 a decode step); every fifth call has one token."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        x = (float(rng.uniform(0, 2)), float(rng.uniform(0, 1)), 0.0, float(rng.uniform(0, 0.5)),
             float(rng.uniform(0.01, 0.08)), float(rng.integers(0, 32)), float(rng.integers(0, 8)))
        out.append((x, 0.05 + 2 * x[0] + x[3], None if k % 5 == 0 else 0.01 + x[4]))
    return out


@pytest.mark.parametrize("name", ["sgd", "river", "lightgbm", "hgb_p90"])
def test_each_model_learns_the_relation_and_is_deterministic(name: str) -> None:
    factory = LATENCY_MODELS[name]
    model, twin = factory(3), factory(3)
    for x, ttft, tpot in stream(1500):
        model.learn(x, ttft, tpot)
        twin.learn(x, ttft, tpot)
    assert model.samples == 1500
    test = stream(200, seed=1)
    preds = model.predict([x for x, _, _ in test])
    assert preds == twin.predict([x for x, _, _ in test])
    ttft_err = np.mean([abs(p[0] - t) for p, (_, t, _) in zip(preds, test, strict=True)])
    tpot_err = np.mean([abs(p[1] - t) for p, (_, _, t) in zip(preds, test, strict=True) if t is not None])
    mean = np.mean([t for _, t, _ in test])
    spread = np.mean([abs(t - mean) for _, t, _ in test])  # the error of always predicting the mean
    # the quantile model aims at the 90th percentile, which on this noiseless stream is the value itself
    assert ttft_err < 0.25 * spread, (name, ttft_err, spread)
    assert tpot_err < 0.01, (name, tpot_err)


def test_an_untrained_model_predicts_no_correction() -> None:
    for name in ("sgd", "lightgbm", "hgb_p90"):
        assert LATENCY_MODELS[name](0).predict([(0.0,) * 7, (1.0,) * 7]) == [(0.0, 0.0), (0.0, 0.0)]
