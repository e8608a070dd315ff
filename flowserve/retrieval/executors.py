"""What the gateway runs for each retrieval op of a workflow graph (`RunOp` / `RunBatch`
commands; the simulator models the same ops with cost profiles):

* `chunk` — a document → overlapping token chunks (the embedder's tokenizer);
* `embed` — texts → `Embedded` (WordLlama); a micro-batch (`micro`, `start`, `last`
  from the `decompose` pass) embeds its slice of the texts;
* `vector_ingest` — `Embedded` → a `VectorIndex` (usearch) of dimension `dim`
  (default: the vectors'); a wrong dimension fails the op;
* `vector_search` — a query's `Embedded` + an index (or the shards micro-batched
  ingestion made) → the k nearest texts;
* `rerank` — the question + `docs*` lists → the `top` texts by embedding cross-score;
* `web_search` — a query → result snippets from the search service (URL of the op's
  `kind: search` instance, else `gateway.retrieval.search_url`);
* `aggregate` — micro-batch results joined back into one value.

Each raises `RetrievalError` with the reason; the query fails with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from flowserve.retrieval.config import RetrievalSettings
from flowserve.retrieval.embedding import Embedded, Embedder
from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.search_client import SearchClient, SearchConfig
from flowserve.retrieval.vectors import VectorIndex, rerank, search_shards
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import ToolOp

Executor = Callable[[ToolOp, InstanceSpec | None], Awaitable[Any]]


def _texts(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise RetrievalError(f"{what}: expected text or a list of texts, got {type(value).__name__}")


def _micro_slice(texts: list[str], args: dict[str, Any]) -> list[str]:
    if "micro" not in args:
        return texts
    start = int(args.get("start", 0))
    return texts[start:] if args.get("last") else texts[start:start + int(args.get("units", 1))]


def _shards(value: Any) -> list[VectorIndex]:
    shards = value if isinstance(value, list) else [value]
    if not shards or not all(isinstance(s, VectorIndex) for s in shards):
        raise RetrievalError(f"vector_search: 'index' is not a vector index ({type(value).__name__})")
    return shards


def aggregate(parts: list[Any]) -> Any:
    """Join micro-batch results: embeddings concatenated, index shards listed, lists
    concatenated."""
    if parts and all(isinstance(p, Embedded) for p in parts):
        return Embedded.concat(parts)
    if parts and all(isinstance(p, VectorIndex) for p in parts):
        return parts
    if all(isinstance(p, list) for p in parts):
        return [x for p in parts for x in p]
    return parts


class RetrievalTools:
    """The retrieval executors of one gateway; the embedder loads on first use."""

    def __init__(self, settings: RetrievalSettings | None = None, embedder: Embedder | None = None) -> None:
        self.settings = settings or RetrievalSettings()
        self._embedder = embedder
        self._loading = asyncio.Lock()
        self._clients: dict[str, SearchClient] = {}

    async def embedder(self) -> Embedder:
        if self._embedder is not None:  # loaded: no lock on every op
            return self._embedder
        async with self._loading:
            if self._embedder is None:
                self._embedder = await asyncio.to_thread(Embedder, self.settings.dim)
        return self._embedder

    def executors(self) -> dict[str, Executor]:
        return {"chunk": self.chunk, "embed": self.embed, "vector_ingest": self.ingest,
                "vector_search": self.search, "rerank": self.rerank, "web_search": self.web_search,
                "aggregate": self.aggregate}

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()
        self._clients.clear()

    # ------------------------------------------------------------------ ops

    async def chunk(self, op: ToolOp, instance: InstanceSpec | None) -> list[str]:
        doc = op.args.get("document")
        if not isinstance(doc, str):
            raise RetrievalError(f"chunk: 'document' must be text, got {type(doc).__name__}")
        e = await self.embedder()
        return await asyncio.to_thread(e.chunk, doc, int(op.args.get("size", 256)), int(op.args.get("overlap", 30)))

    async def embed(self, op: ToolOp, instance: InstanceSpec | None) -> Embedded:
        texts = _micro_slice(_texts(op.args.get("texts"), "embed"), dict(op.args))
        e = await self.embedder()
        return await asyncio.to_thread(e.embed, texts)

    async def ingest(self, op: ToolOp, instance: InstanceSpec | None) -> VectorIndex:
        vectors = op.args.get("vectors")
        if not isinstance(vectors, Embedded):
            raise RetrievalError(f"vector_ingest: 'vectors' must be embeddings, got {type(vectors).__name__}")
        dim = op.args.get("dim") or vectors.dim
        return await asyncio.to_thread(VectorIndex(int(dim)).add, vectors)

    async def search(self, op: ToolOp, instance: InstanceSpec | None) -> list[str]:
        vec = op.args.get("vector")
        if not isinstance(vec, Embedded) or len(vec.texts) != 1:
            raise RetrievalError("vector_search: 'vector' must be one embedded query")
        shards = _shards(op.args.get("index"))
        hits = await asyncio.to_thread(search_shards, shards, vec.vectors[0], int(op.args.get("k", 3)))
        return [h.text for h in hits]

    async def rerank(self, op: ToolOp, instance: InstanceSpec | None) -> list[str]:
        query = op.args.get("query")
        if not isinstance(query, str):
            raise RetrievalError("rerank: 'query' must be text")
        # a `docs*` argument is None when its search did not run (an expansion with fewer queries)
        docs = [t for k in sorted(op.args) if k.startswith("docs") and op.args[k] is not None
                for t in _texts(op.args[k], "rerank")]
        e = await self.embedder()

        def score() -> list[str]:
            both = e.embed([query, *docs])  # one model pass for the query and its documents
            q, d = Embedded(both.texts[:1], both.vectors[:1]), Embedded(both.texts[1:], both.vectors[1:])
            return [h.text for h in rerank(q, d, int(op.args.get("top", 3)))]

        return await asyncio.to_thread(score)

    async def web_search(self, op: ToolOp, instance: InstanceSpec | None) -> list[str]:
        s = self.settings
        url = (instance.url if instance is not None and instance.url else None) or s.search_url
        if url is None:
            raise RetrievalError("web_search: no search service configured (a `kind: search` instance with a "
                                 "`url:`, or gateway.retrieval.search_url)")
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = SearchClient(SearchConfig(url, s.key(), s.search_count,
                                                                    s.search_timeout_s))
        q = op.args.get("query")
        hits = await client.search(q if isinstance(q, str) else "", int(op.args.get("k") or s.search_count))
        return [h.text for h in hits]

    async def aggregate(self, op: ToolOp, instance: InstanceSpec | None) -> Any:
        keys = sorted((k for k in op.args if k[:1] == "p" and k[1:].isdigit()), key=lambda k: int(k[1:]))
        return aggregate([op.args[k] for k in keys])


__all__ = ["Executor", "RetrievalTools", "aggregate"]
