"""Cost profiles of non-LLM engine instances (embedding, reranker, vector DB, search).

A batch of ops costs a fixed overhead plus a per-unit cost (texts embedded, vectors
ingested, queries searched, documents reranked): `t(batch) = base_s + Σ unit_s(op)·units`
(the linear batch-latency fits Teola §5.2 profiles its engines with). The efficient
batch is the size Teola tunes its engines to (§7, "TO"): doubled from 1 while a
doubling still raises throughput by 10 %; stage decomposition sizes micro-batches from
it, and the paper's testbed caps its engines' batches there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowserve.errors import ConfigError

THROUGHPUT_GAIN = 0.1  # a doubling of the batch that gains less is not worth its latency


@dataclass(frozen=True, slots=True)
class OpProfile:
    base_s: float  # fixed cost of one batch
    unit_s: float  # cost of one unit of work (default for every op)
    per_op: tuple[tuple[str, float], ...] = ()  # op → its own unit cost
    max_units: int = 512  # the most units one batch may hold
    concurrency: int = 1  # batches the instance runs at once
    # the most ops (requests) one batch may hold; None: any number, of any queries (dynamic
    # batching, Teola's "TO"); 1: each request alone, as an engine serving one call's
    # bundle at a time does (Teola's "PO", its LlamaDist baselines)
    max_ops: int | None = None
    dim: int | None = None  # vector dimension (embedding / vector_db instances)

    def __post_init__(self) -> None:
        assert self.base_s >= 0 and self.unit_s > 0 and self.max_units >= 1 and self.concurrency >= 1, self
        assert self.max_ops is None or self.max_ops >= 1, self

    def unit_cost(self, op: str) -> float:
        return dict(self.per_op).get(op, self.unit_s)

    def batch_time(self, work: list[tuple[str, int]]) -> float:
        """t = base_s + Σ unit_s(op)·units over the batch's (op, units)."""
        return self.base_s + sum(self.unit_cost(op) * units for op, units in work)

    def efficient_batch(self, op: str, gain: float = THROUGHPUT_GAIN) -> int:
        """The throughput-tuned batch of `op` (`throughput_tuned_batch`), at most `max_units`."""
        return throughput_tuned_batch(self.base_s, self.unit_cost(op), gain, self.max_units)


def throughput_tuned_batch(base_s: float, unit_s: float, gain: float = THROUGHPUT_GAIN, limit: int = 1 << 20) -> int:
    """Teola §7 ("TO": batch sizes doubled until throughput stops growing): from b = 1,
    double while throughput b/t(b), t(b) = base_s + unit_s·b, grows by ≥ `gain`, i.e.
    while 2(base_s + unit_s·b) / (base_s + 2·unit_s·b) ≥ 1 + gain; at most `limit`."""
    b = 1
    while 2 * b <= limit and 2 * (base_s + unit_s * b) / (base_s + 2 * unit_s * b) >= 1 + gain:
        b *= 2
    return b


def _per_unit(base_s: float, batch: int) -> float:
    """A unit cost whose tuned batch is `batch` (a power of two): doubling stops paying 10 %
    once unit_s·b > 4.5·base_s, so put that point at 0.75·batch (u = 6·base_s / batch)."""
    return 6.0 * base_s / batch


def encoder_unit_s(params: float, tokens: int, peak_tflops: float, mfu: float) -> float:
    """Seconds per sequence of a transformer encoder, compute-bound: t = 2·P·T / (peak·MFU)
    (forward FLOPs ≈ 2 per parameter per token; attention is small at T ≤ 512)."""
    return 2.0 * params * tokens / (peak_tflops * 1e12 * mfu)


# Teola's testbed (§7): each non-LLM engine on one RTX 3090 (71 dense fp16 TFLOPs; BERT-
# class inference at ~38 % MFU); bge-large-en-v1.5 (335 M) embeds 256-token chunks,
# bge-reranker-large (560 M) scores (query + chunk ≈ 290 tokens) pairs; pgvector in
# PostgreSQL inserts a row in ~1 ms and answers a top-k query in ~3 ms; Google Custom
# Search answers in ~0.35 s. Fixed costs: request, tokenisation, kernel launches. Each
# engine batches up to its throughput-tuned size (Teola's "TO" engines): 16 chunks,
# 8 pairs, 8 vectors; the search API takes up to 64 queries a request, 8 at once.
RTX3090_TFLOPS, ENCODER_MFU = 71.0, 0.38


def _tuned(base_s: float, unit_s: float, **kw: Any) -> OpProfile:
    return OpProfile(base_s, unit_s, max_units=throughput_tuned_batch(base_s, unit_s), **kw)


PAPER_PROFILES: dict[str, OpProfile] = {
    "embedding": _tuned(0.015, encoder_unit_s(335e6, 256, RTX3090_TFLOPS, ENCODER_MFU), dim=1024),
    "reranker": _tuned(0.015, encoder_unit_s(560e6, 290, RTX3090_TFLOPS, ENCODER_MFU)),
    "vector_db": _tuned(0.005, 0.003, per_op=(("vector_ingest", 0.001),), dim=1024),
    "search": OpProfile(0.35, 0.002, max_units=64, concurrency=8),
}

# Defaults by kind, shaped so the efficient batches are the sizes Teola's authors
# profiled (embedding 128, vector search 64, rerank 64); a search API is dominated by
# its round trip and serves many requests at once.
DEFAULT_PROFILES: dict[str, OpProfile] = {
    "embedding": OpProfile(0.012, _per_unit(0.012, 128), dim=256),
    "vector_db": OpProfile(0.004, _per_unit(0.004, 64), (("vector_ingest", _per_unit(0.004, 128)),), dim=256),
    "reranker": OpProfile(0.02, _per_unit(0.02, 64)),
    "search": OpProfile(0.35, 0.002, max_units=64, concurrency=8),
}


def op_profile(kind: str, overrides: dict[str, Any] | None = None) -> OpProfile:
    """The default profile of an engine kind, with fields overridden."""
    if kind not in DEFAULT_PROFILES:
        raise ConfigError(f"unknown engine kind {kind!r}; known: llm, {', '.join(DEFAULT_PROFILES)}")
    base = DEFAULT_PROFILES[kind]
    if not overrides:
        return base
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ConfigError(f"{kind} profile: unknown field(s) {unknown}; known: {', '.join(fields)}")
    fields.update(overrides)
    if isinstance(fields["per_op"], dict):
        fields["per_op"] = tuple(sorted(fields["per_op"].items()))
    try:
        return OpProfile(**fields)
    except (AssertionError, TypeError) as e:
        raise ConfigError(f"{kind} profile: invalid values {overrides}: {e}") from None


__all__ = ["DEFAULT_PROFILES", "PAPER_PROFILES", "OpProfile", "encoder_unit_s", "op_profile", "throughput_tuned_batch"]
