import math

import pytest

from flowserve.errors import ConfigError
from flowserve.profiles import cost_model_for, get_gpu, get_model
from flowserve.profiles.cost_model import (
    allreduce_time,
    forward_flops,
    kv_capacity_tokens,
    prefill_attended,
)


def test_prefill_attended_hand_computed():
    # 3 new tokens after 2 cached attend to 3, 4, 5 tokens
    assert prefill_attended(3, 2) == 3 + 4 + 5
    assert prefill_attended(1, 0) == 1


def test_forward_flops_hand_computed():
    m = get_model("llama-2-7b")
    # 2·P per token + 4·layers·(heads·head_dim) per attended pair
    assert forward_flops(m, 10, 100) == pytest.approx(2 * 6.74e9 * 10 + 4 * 32 * 4096 * 100)


def test_kv_bytes_and_capacity():
    m = get_model("llama-3.1-70b")
    assert m.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # 327,680 bytes
    g = get_gpu("A100-80G")
    free = 8 * 80 * 2**30 * 0.9 - 70.6e9 * 2
    assert kv_capacity_tokens(g, m, 8, 0.9) == int(free // 327680)
    # 70B weights do not fit on one 80 GB GPU at all
    assert kv_capacity_tokens(g, m, 1, 0.9) == 0


def test_allreduce_time():
    g, m = get_gpu("A6000"), get_model("llama-3.1-70b")
    assert allreduce_time(g, 1, 1000, m) == 0.0
    per = 2 * 7 / 8 * 1000 * 8192 * 2 / 25e9 + 25e-6
    assert allreduce_time(g, 8, 1000, m) == pytest.approx(2 * 80 * per)


def test_roofline_iteration_hand_computed():
    cm = cost_model_for("A100-80G", "llama-2-7b", 1)
    g, m = cm.gpu, cm.model
    # decode step, batch 1, context 1000: memory bound
    nbytes = m.weight_bytes + m.kv_bytes_per_token * (1000 + 1)
    expected = nbytes / (g.hbm_gbps * 1e9 * 0.75) + 0.003 + 2e-5
    assert cm.decode_step_time(1, 1000) == pytest.approx(expected)
    # a 2048-token prefill: compute bound
    flops = forward_flops(m, 2048, prefill_attended(2048, 0))
    assert cm.prefill_time(2048) == pytest.approx(flops / (312e12 * 0.55) + 0.003)
    # published vLLM ballpark: ~11 ms/token decode, ~0.17 s for a 2k prefill
    assert 0.008 < cm.decode_step_time(1, 500) < 0.014
    assert 0.12 < cm.prefill_time(2048) < 0.22


@pytest.mark.parametrize("gpu", ["A100-80G", "A6000", "L40", "L40S", "L4", "H100", "H200"])
def test_monotonic_in_every_argument(gpu):
    cm = cost_model_for(gpu, "llama-3.1-8b", 1)
    base = cm.iteration_time(256, prefill_attended(256, 512), 8, 8000)
    assert cm.iteration_time(512, prefill_attended(512, 512), 8, 8000) > base
    # attention FLOPs can hide under the memory bound: non-decreasing, not strictly
    assert cm.iteration_time(256, prefill_attended(256, 4096), 8, 8000) >= base
    assert cm.iteration_time(256, prefill_attended(256, 40960), 8, 8000) > base
    assert cm.iteration_time(256, prefill_attended(256, 512), 32, 8000) > base
    assert cm.iteration_time(256, prefill_attended(256, 512), 8, 64000) > base
    assert cm.prefill_time(4000, 0) > cm.prefill_time(2000, 0) > cm.prefill_time(1000, 1000)
    assert cm.prefill_time(2000, 1000) > cm.prefill_time(2000, 0)  # attends to more context
    assert cm.call_time(1000, 200) > cm.call_time(1000, 100) > cm.call_time(500, 100)
    assert cm.call_time(1000, 100, cached_tokens=800) < cm.call_time(1000, 100)


def test_faster_hardware_is_faster():
    slow = cost_model_for("A6000", "llama-3.1-70b", 8)
    fast = cost_model_for("A100-80G", "llama-3.1-70b", 8)
    faster = cost_model_for("H100", "llama-3.1-70b", 8)
    for cm_a, cm_b in ((slow, fast), (fast, faster)):
        assert cm_a.prefill_time(4000) > cm_b.prefill_time(4000)
        assert cm_a.decode_step_time(16, 16 * 2000) > cm_b.decode_step_time(16, 16 * 2000)


def test_call_time_is_prefill_plus_decode_steps():
    cm = cost_model_for("H100", "mistral-7b")
    t = cm.call_time(1000, 11)
    expected = cm.prefill_time(1000) + 10 * cm.decode_step_time(1, 1000 + 11 / 2)
    assert t == pytest.approx(expected)
    assert cm.call_time(1000, 1) == pytest.approx(cm.prefill_time(1000))
    assert math.isclose(cm.iteration_time(0, 0, 0, 0), 0.0)


def test_unknown_names_are_config_errors():
    with pytest.raises(ConfigError, match="unknown GPU 'V100'"):
        get_gpu("V100")
    with pytest.raises(ConfigError, match="unknown model 'gpt-5'"):
        get_model("gpt-5")
    assert get_gpu("a100-80g").name == "A100-80G"
    assert get_model("LLAMA-3.1-70B").name == "llama-3.1-70b"
