import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.fitted import (
    COEFFICIENTS,
    FittedCostModel,
    Sample,
    fit_coefficients,
    iteration_features,
    load_profile,
    prefill_features,
)

TRUE = (2e-3, 8e-3, 1.5e-4, 4e-9, 3e-4, 2e-8)


def synthetic(noise: float, seed: int = 0) -> list[Sample]:
    """Prefills (cold and on a cached prefix) and decode steps timed by TRUE, with noise."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (32, 128, 512, 1024, 2048, 3000, 4000):
        out.append(("prefill", prefill_features(n, 0, 2048)))
        out.append(("cached_prefill", prefill_features(64, n, 2048)))
    for b in (1, 2, 4, 8):
        for ctx in (100, 1000, 3000):
            out.append(("decode", iteration_features(0, 0.0, b, b * ctx)))
    return [Sample(kind, tuple(x), float(x @ TRUE) * (1 + noise * rng.standard_normal())) for kind, x in out]


def test_iteration_time_by_hand():
    m = FittedCostModel("m", TRUE, 4096, 10000, 4)
    # prefill of 100 tokens attending 5050 pairs, alongside 2 decoding seqs with 300 context:
    # 2e-3 + 8e-3 + 100·1.5e-4 + 5050·4e-9 + 2·3e-4 + 300·2e-8 = 0.0256262
    assert m.iteration_time(100, 5050, 2, 300) == pytest.approx(0.0256262)
    assert m.iteration_time(0, 0, 2, 300) == pytest.approx(2e-3 + 6e-4 + 6e-6)
    assert m.iteration_time(0, 0, 0, 0) == 0.0
    assert isinstance(m, CostModel)
    # derived: a 10-token prompt and 3 output tokens = prefill + 2 decode steps
    assert m.call_time(10, 3) == pytest.approx(m.prefill_time(10) + 2 * m.decode_step_time(1, 11.5))


def test_narrow_prefills_attend_at_the_decode_rate():
    m = FittedCostModel("m", TRUE, 4096, 10000, 4, narrow_prefill_tokens=64)
    # 32 new tokens on 1000 cached: A = 32·1000 + 32·33/2 = 32528 pairs at c_decode_context
    assert m.iteration_time(32, 32528, 0, 0) == pytest.approx(2e-3 + 8e-3 + 32 * 1.5e-4 + 32528 * 2e-8)
    assert m.iteration_time(64, 1000, 0, 0) == pytest.approx(2e-3 + 8e-3 + 64 * 1.5e-4 + 1000 * 4e-9)
    x = prefill_features(32, 1000, 2048, narrow=64)
    assert x.tolist() == pytest.approx([1, 1, 32, 0, 0, 32528])
    assert float(x @ TRUE) == pytest.approx(m.prefill_time(32, 1000))


def test_prefill_features_sum_the_chunks():
    """3000 new tokens on 100 cached, budget 2048: chunks of 2048 and 952 tokens."""
    x = prefill_features(3000, 100, 2048)
    a1 = 2048 * 100 + 2048 * 2049 / 2
    a2 = 952 * 2148 + 952 * 953 / 2
    assert x.tolist() == pytest.approx([2, 2, 3000, a1 + a2, 0, 0])


def test_fit_recovers_known_coefficients_exactly_without_noise():
    coef, q = fit_coefficients(synthetic(0.0))
    assert coef == pytest.approx(TRUE, rel=1e-6)
    assert q.mean_abs_pct_error < 1e-4 and q.r2 == pytest.approx(1.0)


def test_fit_is_close_under_noise_and_reports_its_error():
    samples = synthetic(0.03, seed=7)
    coef, q = fit_coefficients(samples)
    m = FittedCostModel("m", coef, 8192, 10000, 8)
    for n in (256, 2048, 4000):
        assert m.prefill_time(n) == pytest.approx(FittedCostModel("t", TRUE, 8192, 10000, 8).prefill_time(n), rel=0.05)
    assert m.decode_step_time(4, 4000) == pytest.approx(2e-3 + 4 * 3e-4 + 4000 * 2e-8, rel=0.05)
    assert 0.5 < q.mean_abs_pct_error < 6 and q.samples == len(samples)
    assert {k for k, _ in q.by_kind} == {"prefill", "cached_prefill", "decode"}


def test_fit_never_returns_negative_coefficients():
    # times that fall with batch size would need a negative per-sequence cost
    samples = [Sample("decode", tuple(iteration_features(0, 0, b, 0)), 0.01 / b) for b in (1, 2, 4, 8)]
    coef, _ = fit_coefficients(samples)
    assert min(coef) >= 0 and coef[COEFFICIENTS.index("c_decode_seq")] == 0


def test_profile_yaml_round_trips(tmp_path):
    coef, q = fit_coefficients(synthetic(0.02))
    m = FittedCostModel("tiny-llama", coef, 4096, 16384, 4, 512, "llama-server (1 thread)", q, 64)
    m.save(tmp_path / "p.yaml")
    back = load_profile(tmp_path / "p.yaml")
    assert back == m and hash(back) == hash(m)
    assert yaml.safe_load((tmp_path / "p.yaml").read_text())["coefficients"]["c_attended"] == pytest.approx(coef[3])


def test_malformed_profiles_are_config_errors(tmp_path):
    good = FittedCostModel("m", TRUE, 4096, 16384, 4).to_dict()
    cases = {"slots": 0, "coefficients": {**good["coefficients"], "c0": -1.0}, "extra_field": 1}
    for key, value in cases.items():
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**good, key: value}))
        with pytest.raises(ConfigError, match=r"bad\.yaml"):
            load_profile(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_profile(tmp_path / "missing.yaml")


def test_request_overhead_is_the_median_residual_and_never_negative():
    from flowserve.calibrate.profiler import request_overhead
    from flowserve.profiles.fitted import FittedCostModel

    model = FittedCostModel("m", (1e-3, 0.0, 1e-5, 0.0, 1e-4, 0.0), 8192, 10**5, 4)
    reqs = [(n, o, 0, model.call_time(n, o) + extra) for n, o, extra in
            ((100, 5, 0.010), (200, 8, 0.012), (50, 3, 0.011), (80, 2, 0.5))]
    assert request_overhead(model, reqs) == pytest.approx(0.0115)
    assert request_overhead(model, [(100, 5, 0, 1e-6)]) == 0.0
    assert request_overhead(model, []) == 0.0
    saved = FittedCostModel.from_dict(
        FittedCostModel("m", model.coefficients, 8192, 10**5, 4, request_overhead_s=0.02).to_dict())
    assert saved.request_overhead_s == 0.02


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["kv_unified", "cache_ram_tokens", "slot_prompt_similarity",
                                        "cache_idle_slots", "other"]),
                       st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(-1, 2),
                                 st.text(max_size=5)), max_size=5))
def test_slot_cache_section_fuzz(section):
    """Any `slot_cache:` either loads as a valid SlotConfig or is a ConfigError naming the source."""
    data = {**FittedCostModel("m", TRUE, 4096, 16384, 4).to_dict(), "slot_cache": section}
    try:
        m = FittedCostModel.from_dict(data, "fuzz.yaml")
    except ConfigError as e:
        assert "fuzz.yaml" in str(e)
        return
    cfg = m.slot_config
    assert cfg is not None and 0 <= cfg.similarity <= 1
    assert cfg.cache_ram_tokens is None or cfg.cache_ram_tokens >= 0
