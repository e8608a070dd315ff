"""The BM25 web-search service (its own process, 127.0.0.1) behind a hosted-search-API
client: results, key, count; down, slow, refusing or malformed services fail with
their reason. Fuzz tests guard the service's query parsing and the client's answer
parsing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fixtures_retrieval import SEARCH_KEY, TOPICS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from flowserve.retrieval.corpus import Doc
from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.process import SearchServiceProcess, free_port
from flowserve.retrieval.search_client import SearchClient, SearchConfig
from flowserve.retrieval.search_service import PATH, BM25Search, make_app


def search(cfg: SearchConfig, q: str, count: int | None = None, client: httpx.AsyncClient | None = None):
    async def body():
        c = SearchClient(cfg, client)
        try:
            return await c.search(q, count)
        finally:
            await c.aclose()
    return asyncio.run(body())


def test_bm25_finds_the_document_about_the_query(search_service: SearchServiceProcess) -> None:
    hits = search(SearchConfig(search_service.url, SEARCH_KEY, 2), "volcano lava magma eruption")
    assert 1 <= len(hits) <= 2 and hits[0].text == TOPICS["volcano.txt"] and hits[0].source.endswith("#chunk0")
    assert len(search(SearchConfig(search_service.url, SEARCH_KEY, 2), "orbit gravity", count=1)) == 1
    # the project's README is part of the corpus
    assert any("README.md" in h.source for h in search(SearchConfig(search_service.url, SEARCH_KEY, 5),
                                                           "flowserve gateway simulator scheduler core"))


def test_a_wrong_key_or_a_bad_query_is_refused_with_the_reason(search_service: SearchServiceProcess) -> None:
    with pytest.raises(RetrievalError, match="HTTP 401: missing or wrong X-Subscription-Token"):
        search(SearchConfig(search_service.url, "sk-wrong"), "volcano")
    with pytest.raises(RetrievalError, match=r"HTTP 422: query parameter 'count' must be in 1\.\.20"):
        search(SearchConfig(search_service.url, SEARCH_KEY), "volcano", count=99)
    with pytest.raises(RetrievalError, match="the query is empty"):
        search(SearchConfig(search_service.url, SEARCH_KEY), "  ")


def test_a_service_that_is_down_fails_the_search_with_the_reason() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(RetrievalError, match=f"search service {url} is unreachable: ConnectError"):
        search(SearchConfig(url, timeout_s=2.0), "volcano")


def test_a_slow_service_times_out_with_the_reason(corpus_dir: Path) -> None:
    with SearchServiceProcess([corpus_dir], delay_s=5.0) as slow, \
            pytest.raises(RetrievalError, match=r"did not answer within 0\.2 s"):
        search(SearchConfig(slow.url, timeout_s=0.2), "volcano")


def _engine() -> BM25Search:
    return BM25Search([Doc(i, name, f"file:///{name}", text) for i, (name, text) in enumerate(TOPICS.items())])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.text(max_size=40), count=st.one_of(st.none(), st.text(max_size=4), st.integers(-5, 30).map(str)))
def test_fuzz_the_service_answers_every_query_string_with_200_or_422(q: str, count: str | None) -> None:
    with TestClient(make_app(_engine(), key="k")) as http:
        params = {"q": q} | ({} if count is None else {"count": count})
        r = http.get(PATH, params=params, headers={"X-Subscription-Token": "k"})
    assert r.status_code in (200, 422), r.text
    body = r.json()
    if r.status_code == 200:
        assert isinstance(body["web"]["results"], list) and len(body["web"]["results"]) <= int(count or 5)
    else:
        assert body["error"]["message"]


@settings(max_examples=80, deadline=None)
@given(body=st.one_of(st.binary(max_size=60), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["web", "results", "description", "url"]),
                                                          c, max_size=3), max_leaves=10).map(
    lambda v: json.dumps(v).encode())), status=st.sampled_from([200, 200, 500]))
def test_fuzz_the_client_turns_any_answer_into_hits_or_a_retrieval_error(body: bytes, status: int) -> None:
    transport = httpx.MockTransport(lambda req: httpx.Response(status, content=body))
    try:
        hits = search(SearchConfig("http://mock"), "q", client=httpx.AsyncClient(transport=transport))
    except RetrievalError as e:
        assert "search service http://mock" in str(e)
    else:
        assert status == 200 and all(isinstance(h.text, str) for h in hits)
