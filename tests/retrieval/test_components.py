"""The offline retrieval components: WordLlama embeddings, token chunking, the usearch
index (and its dimension checks), rerank by embedding cross-scores, the executors'
micro-batch slicing and aggregation."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from fixtures_retrieval import TOPICS

from flowserve.retrieval.embedding import Embedded, Embedder, chunk_tokens
from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.executors import RetrievalTools, aggregate
from flowserve.retrieval.vectors import VectorIndex, rerank, search_shards
from flowserve.types.work import ToolOp


class _Enc:
    def __init__(self, offsets: list[tuple[int, int]]) -> None:
        self.offsets = offsets


class WordTok:
    """A tokenizer stand-in: one token per character (hand-checkable offsets)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> _Enc:
        return _Enc([(i, i + 1) for i in range(len(text))])


def test_chunks_are_windows_of_size_tokens_sharing_overlap_tokens() -> None:
    # 10 tokens, size 4, overlap 1 → starts at 0, 3, 6 (the last window is the rest)
    assert chunk_tokens("abcdefghij", WordTok(), 4, 1) == ["abcd", "defg", "ghij"]
    assert chunk_tokens("abc", WordTok(), 4, 1) == ["abc"]
    assert chunk_tokens("", WordTok(), 4, 1) == []


def test_wordllama_chunks_256_tokens_with_overlap_30(embedder: Embedder) -> None:
    text = " ".join(f"word{i}" for i in range(600))
    chunks = embedder.chunk(text, 256, 30)
    ids = [embedder.tokenizer.encode(c, add_special_tokens=False).ids for c in chunks]
    assert len(chunks) >= 3 and all(len(i) <= 257 for i in ids)
    assert chunks[0].split()[-1] in chunks[1]  # consecutive chunks overlap


def test_embeddings_are_unit_rows_and_similar_texts_score_higher(embedder: Embedder) -> None:
    e = embedder.embed(["lava and magma from a volcano", "volcanic eruption of ash", "baking a loaf of bread"])
    assert e.vectors.shape == (3, 256) and e.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(e.vectors, axis=1), 1.0, atol=1e-5)
    sims = e.vectors @ e.vectors.T
    assert sims[0, 1] > sims[0, 2]


def test_the_index_finds_the_nearest_text_and_checks_dimensions(embedder: Embedder) -> None:
    docs = embedder.embed(list(TOPICS.values()))
    index = VectorIndex(256).add(docs)
    hits = index.search(embedder.embed(["why does the moon circle the earth"]).vectors[0], 2)
    assert len(hits) == 2 and "orbit" in hits[0].text and hits[0].score >= hits[1].score
    with pytest.raises(RetrievalError, match="dimension 128; cannot ingest vectors of dimension 256"):
        VectorIndex(128).add(docs)
    with pytest.raises(RetrievalError, match="the query vector has dimension 3"):
        index.search(np.ones(3, np.float32), 1)
    # shards (micro-batched ingestion) search as one index
    a, b = VectorIndex(256).add(Embedded(docs.texts[:1], docs.vectors[:1])), VectorIndex(256).add(
        Embedded(docs.texts[1:], docs.vectors[1:]))
    q = embedder.embed(["yeast and flour"]).vectors[0]
    assert [h.text for h in search_shards([a, b], q, 3)] == [h.text for h in index.search(q, 3)]


def test_rerank_orders_by_cross_score_and_counts_duplicates_once(embedder: Embedder) -> None:
    texts = [*TOPICS.values(), TOPICS["bread.txt"]]
    top = rerank(embedder.embed(["how is bread baked in an oven"]), embedder.embed(texts), 2)
    assert top[0].text == TOPICS["bread.txt"] and len({h.text for h in top}) == 2


def _op(op: str, **args: object) -> ToolOp:
    return ToolOp(1, 1, op, op, op, args)


def test_executors_slice_micro_batches_and_aggregate_them(embedder: Embedder) -> None:
    tools = RetrievalTools(embedder=embedder)
    texts = [f"text number {i}" for i in range(7)]

    async def body() -> None:
        m0 = await tools.embed(_op("embed", texts=texts, units=3, micro=0, start=0, last=False), None)
        m2 = await tools.embed(_op("embed", texts=texts, units=1, micro=2, start=6, last=True), None)
        assert m0.texts == tuple(texts[:3]) and m2.texts == tuple(texts[6:])
        whole = aggregate([m0, m2])
        assert isinstance(whole, Embedded) and whole.texts == (*texts[:3], texts[6])
        shards = [await tools.ingest(_op("vector_ingest", vectors=m), None) for m in (m0, m2)]
        assert aggregate(shards) == shards
        q = await tools.embed(_op("embed", texts="text number 6"), None)
        assert (await tools.search(_op("vector_search", vector=q, index=shards, k=1), None)) == ["text number 6"]
        with pytest.raises(RetrievalError, match="dimension 64"):
            await tools.ingest(_op("vector_ingest", vectors=m0, dim=64), None)
        with pytest.raises(RetrievalError, match="not a vector index"):
            await tools.search(_op("vector_search", vector=q, index="nope"), None)
        with pytest.raises(RetrievalError, match="expected text"):
            await tools.embed(_op("embed", texts=[1, 2]), None)
        with pytest.raises(RetrievalError, match="no search service configured"):
            await tools.web_search(_op("web_search", query="x"), None)

    asyncio.run(body())
