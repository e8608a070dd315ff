"""Cost profiles of non-LLM engines: the encoder cost formula and the paper's testbed."""

from __future__ import annotations

import pytest

from flowserve.profiles.ops import DEFAULT_PROFILES, PAPER_PROFILES, encoder_unit_s, throughput_tuned_batch


def test_encoder_unit_s_is_two_flops_per_parameter_per_token_at_the_mfu() -> None:
    # 2 · 335e6 · 256 = 1.7152e11 FLOPs; 71e12 · 0.38 = 2.698e13 FLOP/s → 6.357 ms
    assert encoder_unit_s(335e6, 256, 71.0, 0.38) == pytest.approx(6.357e-3, rel=1e-3)
    assert encoder_unit_s(1e9, 100, 100.0, 1.0) == pytest.approx(2e-3)


def test_the_paper_profiles_embed_a_40k_token_document_in_about_a_second() -> None:
    emb = PAPER_PROFILES["embedding"]
    assert 1.0 < emb.batch_time([("embed", 177)]) < 1.3
    assert PAPER_PROFILES["reranker"].batch_time([("rerank", 48)]) == pytest.approx(0.015 + 48 * 0.01204, rel=1e-2)


def test_throughput_tuned_batch_doubles_while_throughput_grows_by_ten_percent() -> None:
    # base 15 ms, 6.36 ms a unit: b/t(b) = 1/21.4, 2/27.7, 4/40.4, 8/65.9, 16/116.7, 32/218.4 (per ms):
    # doublings gain 1.54, 1.37, 1.23, 1.13, then 1.07 < 1.1 → 16
    assert throughput_tuned_batch(0.015, 0.00636) == 16
    assert throughput_tuned_batch(0.015, 0.00636, gain=0.05) == 32  # 1.07 ≥ 1.05; 32 → 64 gains 1.035
    assert throughput_tuned_batch(0.015, 0.00636, limit=4) == 4
    assert throughput_tuned_batch(0.0, 0.001) == 1  # no fixed cost: batching never pays
    # the paper's testbed: each engine batches up to its tuned size
    assert [PAPER_PROFILES[k].max_units for k in ("embedding", "reranker", "vector_db")] == [16, 8, 8]
    assert PAPER_PROFILES["embedding"].efficient_batch("embed") == 16
    # the defaults keep the authors' micro-batch sizes (embedding 128, vector search 64, rerank 64)
    assert [DEFAULT_PROFILES[k].efficient_batch(op) for k, op in
            (("embedding", "embed"), ("vector_db", "vector_search"), ("reranker", "rerank"))] == [128, 64, 64]
