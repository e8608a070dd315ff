"""Cost profiles of non-LLM engines: the encoder cost formula and the paper's testbed."""

from __future__ import annotations

import pytest

from flowserve.profiles.ops import PAPER_PROFILES, encoder_unit_s


def test_encoder_unit_s_is_two_flops_per_parameter_per_token_at_the_mfu() -> None:
    # 2 · 335e6 · 256 = 1.7152e11 FLOPs; 71e12 · 0.38 = 2.698e13 FLOP/s → 6.357 ms
    assert encoder_unit_s(335e6, 256, 71.0, 0.38) == pytest.approx(6.357e-3, rel=1e-3)
    assert encoder_unit_s(1e9, 100, 100.0, 1.0) == pytest.approx(2e-3)


def test_the_paper_profiles_embed_a_40k_token_document_in_about_a_second() -> None:
    emb = PAPER_PROFILES["embedding"]
    assert 1.0 < emb.batch_time([("embed", 177)]) < 1.3
    assert PAPER_PROFILES["reranker"].batch_time([("rerank", 48)]) == pytest.approx(0.015 + 48 * 0.01204, rel=1e-2)
