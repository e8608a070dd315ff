"""A vector index over embedded texts: `usearch` with cosine distance.

Why usearch over faiss-cpu: a ~2 MB wheel with no BLAS/OpenMP baggage, explicit integer
keys (each hit maps back to its text), exact or HNSW search in one class, and it
checks the dimension of what it is given. A per-query document index (Teola's document
QA ingests each query's document) is small, so searches are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from usearch.index import Index

from flowserve.retrieval.embedding import Embedded
from flowserve.retrieval.errors import RetrievalError


@dataclass(frozen=True)
class Hit:
    text: str
    score: float
    source: str = ""


class VectorIndex:
    """Texts and their vectors; `search` returns the k nearest texts (cosine)."""

    def __init__(self, dim: int) -> None:
        assert dim > 0, dim
        self.dim = dim
        self._index = Index(ndim=dim, metric="cos", dtype="f32")
        self._texts: list[str] = []

    def __len__(self) -> int:
        return len(self._texts)

    def add(self, items: Embedded) -> VectorIndex:
        if items.dim != self.dim:
            raise RetrievalError(f"vector index has dimension {self.dim}; cannot ingest vectors of dimension "
                                 f"{items.dim}")
        if len(items.texts):
            keys = np.arange(len(self._texts), len(self._texts) + len(items.texts), dtype=np.uint64)
            self._index.add(keys, np.ascontiguousarray(items.vectors, dtype=np.float32))
            self._texts.extend(items.texts)
        return self

    def search(self, vector: np.ndarray, k: int) -> list[Hit]:
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self.dim:
            raise RetrievalError(f"vector index has dimension {self.dim}; the query vector has dimension "
                                 f"{vector.shape[0]}")
        if not self._texts or k <= 0:
            return []
        m = self._index.search(vector, min(k, len(self._texts)), exact=True)
        return [Hit(self._texts[int(key)], float(1.0 - d)) for key, d in zip(m.keys, m.distances, strict=True)]


def search_shards(shards: list[VectorIndex], vector: np.ndarray, k: int) -> list[Hit]:
    """The k best hits over several indexes (micro-batched ingestion makes one per
    micro-batch)."""
    hits = [h for s in shards for h in s.search(vector, k)]
    return sorted(hits, key=lambda h: -h.score)[:k]


def rerank(query: Embedded, docs: Embedded, top: int) -> list[Hit]:
    """Cross-score every document against the query through their embeddings (cosine)
    and keep the `top` best; duplicates (the same chunk retrieved by several expanded
    queries) count once."""
    if query.dim != docs.dim:
        raise RetrievalError(f"rerank: query dimension {query.dim} ≠ document dimension {docs.dim}")
    scores = docs.vectors @ query.vectors[0] if len(docs.texts) else np.zeros(0)
    out: list[Hit] = []
    seen: set[str] = set()
    for i in np.argsort(-scores, kind="stable"):
        t = docs.texts[int(i)]
        if t not in seen:
            seen.add(t)
            out.append(Hit(t, float(scores[int(i)])))
        if len(out) == top:
            break
    return out
