"""The web-search client: the interface of a hosted search API (Brave Search's shape:
URL, key in `X-Subscription-Token`, `count` results), so the project's BM25 service
(`flowserve.retrieval.search_service`) and a real provider plug in alike. Every failure
— down, slow, refused, malformed — is a `RetrievalError` naming the service and why."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from flowserve.retrieval.errors import RetrievalError
from flowserve.retrieval.search_service import KEY_HEADER, PATH
from flowserve.retrieval.vectors import Hit


@dataclass(frozen=True)
class SearchConfig:
    url: str  # the service's base URL (the path of the search endpoint is appended)
    key: str | None = None
    count: int = 3
    timeout_s: float = 5.0


class SearchClient:
    def __init__(self, config: SearchConfig, client: httpx.AsyncClient | None = None) -> None:
        assert config.count >= 1 and config.timeout_s > 0, config
        self.config = config
        self._client = client or httpx.AsyncClient()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def search(self, query: str, count: int | None = None) -> list[Hit]:
        c = self.config
        if not isinstance(query, str) or not query.strip():
            raise RetrievalError("web_search: the query is empty")
        url = c.url.rstrip("/") + PATH
        headers = {"Accept": "application/json"} | ({KEY_HEADER: c.key} if c.key else {})
        try:
            r = await self._client.get(url, params={"q": query, "count": count or c.count}, headers=headers,
                                       timeout=c.timeout_s)
        except httpx.TimeoutException:
            raise RetrievalError(f"search service {c.url} did not answer within {c.timeout_s:g} s") from None
        except httpx.HTTPError as e:
            raise RetrievalError(f"search service {c.url} is unreachable: {type(e).__name__}: {e}") from None
        if r.status_code != 200:
            raise RetrievalError(f"search service {c.url} answered HTTP {r.status_code}: {_message(r)}")
        try:
            results = r.json()["web"]["results"]
            return [Hit(str(x.get("description", "")), 1.0 / (i + 1), str(x.get("url", "")))
                    for i, x in enumerate(results)]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RetrievalError(f"search service {c.url} sent a malformed answer: {r.text[:200]!r}") from None


def _message(r: httpx.Response) -> str:
    try:
        body = r.json()
        return str(body["error"]["message"]) if isinstance(body, dict) and "error" in body else r.text[:200]
    except ValueError:
        return r.text[:200]
