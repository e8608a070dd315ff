"""The KV transfer model (issue 46): bytes from the model's architecture, time from the
link, the layer-wise overlap — by hand, and against a published measurement."""

from __future__ import annotations

import pytest

from flowserve.profiles.links import exposed_transfer_s, kv_bytes, kv_transfer_s, link_class
from flowserve.profiles.models import get_model


def test_kv_bytes_by_hand() -> None:
    # llama-3.1-8b: 2 (K, V) · 32 layers · 8 KV heads · 128 head dim · 2 bytes = 131,072 bytes per token
    assert kv_bytes(1, get_model("llama-3.1-8b")) == 131_072
    assert kv_bytes(1000, get_model("llama-3.1-70b")) == 1000 * 2 * 80 * 8 * 128 * 2
    assert kv_bytes(0, get_model("llama-3.1-8b")) == 0


def test_transfer_time_by_hand() -> None:
    # 8,192 tokens of llama-3.1-8b = 1,073,741,824 bytes over one NDR port (50 GB/s at 0.9): 2 µs + 23.86 ms
    link = link_class("infiniband")
    assert kv_transfer_s(8192, get_model("llama-3.1-8b"), link) == pytest.approx(2e-6 + 1_073_741_824 / 45e9)
    assert kv_transfer_s(0, get_model("llama-3.1-8b"), link) == 0.0


def test_against_mooncakes_published_measurement() -> None:
    """Mooncake's Transfer Engine README: 40 GB — the KV of 128k tokens of LLaMA3-70B — at
    87 GB/s over 4×200 Gbps RoCE, i.e. 42.9e9 bytes in 0.49 s. The model is within 20%."""
    model = get_model("llama-3-70b")
    tokens = 128 * 1024
    assert kv_bytes(tokens, model) == pytest.approx(40 * 2**30)  # the README's "40 GB"
    measured_s = kv_bytes(tokens, model) / 87e9
    predicted_s = kv_transfer_s(tokens, model, link_class("roce", bandwidth_gbps=4 * 200))
    assert abs(predicted_s / measured_s - 1) < 0.20
    assert predicted_s == pytest.approx(0.477, abs=0.001) and measured_s == pytest.approx(0.494, abs=0.001)


def test_layerwise_overlap_by_hand() -> None:
    # 80 layers, a 0.8 s prefill: a 0.4 s transfer hides behind it but for its last layer (5 ms)
    assert exposed_transfer_s(0.4, 0.8, 80, layerwise=True) == pytest.approx(0.4 / 80)
    # a 2 s transfer outlasts the prefill: 2 − 0.8 · 79/80 = 1.21 s remain after it
    assert exposed_transfer_s(2.0, 0.8, 80, layerwise=True) == pytest.approx(2.0 - 0.8 * 79 / 80)
    # sent after the prefill (vLLM's NIXL connector): all of it
    assert exposed_transfer_s(0.4, 0.8, 80, layerwise=False) == 0.4
    assert exposed_transfer_s(0.0, 0.8, 80, layerwise=True) == 0.0
