"""A web-search HTTP service: BM25 (`bm25s`) over a local corpus, in its own process.

Its API has the shape of a hosted web-search API (Brave Search's): `GET
/res/v1/web/search?q=QUERY&count=N` with the key in `X-Subscription-Token`, answering
`{"query": {"original": q}, "web": {"results": [{"title", "url", "description"}]}}`; so
`flowserve.retrieval.search_client.SearchClient` talks to a real provider unchanged.

    python -m flowserve.retrieval.search_service --corpus README.md /work/shared/papers \
        --port 8300 [--key KEY] [--delay-s 0.5]

`--delay-s` makes every answer late (a slow provider, for tests and benchmarks).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from flowserve.retrieval.corpus import Doc, build_corpus
from flowserve.retrieval.embedding import load_tokenizer

PATH = "/res/v1/web/search"
KEY_HEADER = "X-Subscription-Token"
MAX_COUNT = 20


class BM25Search:
    def __init__(self, docs: Sequence[Doc]) -> None:
        import bm25s  # here: the gateway imports this module's constants, not bm25s's scipy and tqdm

        self.docs = list(docs)
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize([d.text for d in self.docs], show_progress=False), show_progress=False)

    def search(self, query: str, count: int) -> list[Doc]:
        import bm25s

        tokens = bm25s.tokenize([query], show_progress=False)
        if not tokens.vocab:  # nothing searchable (only stopwords / punctuation)
            return []
        ids, scores = self._bm25.retrieve(tokens, k=min(count, len(self.docs)), show_progress=False, n_threads=1)
        return [self.docs[int(i)] for i, s in zip(ids[0], scores[0], strict=True) if float(s) > 0.0]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error" if status < 500
                                   else "server_error"}}, status_code=status)


def make_app(engine: BM25Search, key: str | None = None, delay_s: float = 0.0) -> Starlette:
    async def web_search(request: Request) -> JSONResponse:
        if key is not None and request.headers.get(KEY_HEADER) != key:
            return _error(401, f"missing or wrong {KEY_HEADER}")
        q = request.query_params.get("q", "")
        if not q.strip():
            return _error(422, "query parameter 'q' is required")
        try:
            count = int(request.query_params.get("count", "5"))
        except ValueError:
            return _error(422, "query parameter 'count' must be an integer")
        if not 1 <= count <= MAX_COUNT:
            return _error(422, f"query parameter 'count' must be in 1..{MAX_COUNT}")
        if delay_s:
            await asyncio.sleep(delay_s)  # the modelled latency of a slow provider
        hits = await asyncio.to_thread(engine.search, q, count)
        return JSONResponse({"query": {"original": q}, "type": "search", "web": {"results": [
            {"title": d.title, "url": d.url, "description": d.text} for d in hits]}})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "documents": len(engine.docs)})

    return Starlette(routes=[Route(PATH, web_search), Route("/health", health)])


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description="BM25 web-search service over a local corpus")
    ap.add_argument("--corpus", nargs="+", required=True, help="files or folders (.txt/.md)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8300)
    ap.add_argument("--key", default=None)
    ap.add_argument("--delay-s", type=float, default=0.0)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--overlap", type=int, default=30)
    a = ap.parse_args(argv)
    np.seterr(all="ignore")
    engine = BM25Search(build_corpus(a.corpus, load_tokenizer(), a.chunk, a.overlap))
    uvicorn.run(make_app(engine, a.key, a.delay_s), host=a.host, port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
