"""Tables with the paper's column statistics (Liu et al. Table 2: Amazon digital-music
5-core reviews): a product has ~18 reviews; `description` (long, ~600 chars) and
`format` depend on the product (functional dependencies of `asin`); `reviewText` is
near-unique (~300 chars); `summary` short and often repeated; `verified` ~59% true
(8,874 of 15,000 rows); `overall` 1–5. And a documents table for Q5 (RAG by join)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

WORDS = ("music", "album", "song", "sound", "great", "voice", "guitar", "beat", "classic", "track", "love", "mix",
         "band", "lyrics", "rhythm", "studio", "live", "piano", "jazz", "rock", "soul", "dance", "bass", "tone",
         "record", "vinyl", "release", "artist", "melody", "chorus", "fans", "remaster", "edition", "quality")
FORMATS = ("MP3 Music", "Audio CD", "Vinyl", "Streaming")
SUMMARIES = ("Five Stars", "Four Stars", "Great album", "Love it", "Three Stars", "Classic", "Must have")


def _text(rng: np.random.Generator, words: int) -> str:
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), words))


def products(rows: int = 2000, seed: int = 0, reviews_per_product: float = 18.0) -> pa.Table:
    rng = np.random.default_rng(seed)
    n_products = max(1, round(rows / reviews_per_product))
    desc = [_text(rng, int(rng.integers(70, 130))) for _ in range(n_products)]
    fmt = [FORMATS[int(i)] for i in rng.integers(0, len(FORMATS), n_products)]
    # Zipf-like popularity: a few products have many reviews (as in 5-core subsets)
    weights = 1.0 / np.arange(1, n_products + 1) ** 0.6
    prod = rng.choice(n_products, size=rows, p=weights / weights.sum())
    return pa.table({
        "asin": [f"B{p:09d}" for p in prod],
        "reviewText": [_text(rng, int(rng.integers(30, 70))) for _ in range(rows)],
        "verified": (rng.random(rows) < 0.59).tolist(),
        "overall": rng.integers(1, 6, rows).astype(float).tolist(),
        "summary": [SUMMARIES[int(i)] for i in rng.integers(0, len(SUMMARIES), rows)],
        "format": [fmt[p] for p in prod],
        "description": [desc[p] for p in prod],
    })


def squad_like(questions: int = 500, contexts: int = 60, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    """(questions, documents): each question names its context passage (the join key)."""
    rng = np.random.default_rng(seed)
    docs = pa.table({"doc_id": list(range(contexts)),
                     "context": [_text(rng, int(rng.integers(90, 160))) for _ in range(contexts)]})
    q_doc = rng.integers(0, contexts, questions)
    qs = pa.table({"id": list(range(questions)), "doc_id": q_doc.tolist(),
                   "question": [_text(rng, int(rng.integers(8, 16))) + "?" for _ in range(questions)],
                   "is_impossible": (rng.random(questions) < 0.2).tolist()})
    return qs, docs
