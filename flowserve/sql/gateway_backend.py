"""Statements against a running gateway (or any OpenAI-compatible server): each batch's
calls go out concurrently over `/v1/completions` in the planner's send order, at most
`concurrency` in flight, and come back in request order. A call that fails (HTTP error,
the server down mid-statement) is that row's error; Ctrl-C cancels the calls still out
(closing their connections lets the gateway cancel them on the engines)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from flowserve.sql.backend import Answer, Progress, usage_report
from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import Request
from flowserve.types.work import QueryClass


class GatewayBackend:
    def __init__(self, url: str, model: str | None = None, concurrency: int = 32, timeout_s: float = 300.0,
                 params: dict[str, Any] | None = None, api_key: str | None = None,
                 query_class: QueryClass = "batch", chat: bool = False) -> None:
        self.url = url.rstrip("/")
        self.chat = chat  # /v1/chat/completions with the prompt as one user message
        self.cluster = None  # the engines behind the gateway are unknown here: the planner models the paper's
        # LLM-in-SQL is batch work unless asked otherwise: no SLO, it fills idle capacity
        self.headers = {"x-flowserve-class": query_class} | ({"authorization": f"Bearer {api_key}"} if api_key else {})
        self.model = model
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.params = dict(params or {"temperature": 0.0})
        self._t0: float | None = None
        self._t1 = 0.0
        self._calls = 0
        self._prompt = 0
        self._cached = 0

    def _resolve_model(self, client: httpx.Client) -> str | None:
        if self.model is None:
            try:
                data = client.get(f"{self.url}/v1/models").json().get("data") or []
                self.model = data[0]["id"] if data else None
            except (httpx.HTTPError, ValueError, KeyError, IndexError, AttributeError):
                self.model = None  # the completion calls will say what is wrong
        return self.model

    def run(self, requests: Sequence[Request], stage: str, output: OutputSpec, progress: Progress) -> list[Answer]:
        if self._t0 is None:
            self._t0 = time.perf_counter()
        if self.model is None:
            with httpx.Client(timeout=10.0, headers=self.headers) as c:
                self._resolve_model(c)
        answers = asyncio.run(self._batch(requests, progress))
        self._t1 = time.perf_counter()
        return answers

    async def _batch(self, requests: Sequence[Request], progress: Progress) -> list[Answer]:
        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        done = [asyncio.Event() for _ in requests]
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=self.headers) as client:
            async def one(k: int, req: Request) -> Answer:
                if req.after is not None:  # its prefix warm-up goes first
                    await done[req.after].wait()
                async with sem:
                    a = await self._call(client, req)
                self._calls += 1
                self._prompt += a.prompt_tokens
                self._cached += a.cached_tokens
                progress(1, a.prompt_tokens, a.cached_tokens)
                done[k].set()
                return a
            # tasks are created in send order, so the semaphore admits them in that order
            return list(await asyncio.gather(*[one(k, r) for k, r in enumerate(requests)]))

    async def _call(self, client: httpx.AsyncClient, req: Request) -> Answer:
        prompt = {"messages": [{"role": "user", "content": req.prompt}]} if self.chat else {"prompt": req.prompt}
        body = {"model": self.model, **prompt, "max_tokens": req.max_tokens, **self.params}
        try:
            r = await client.post(f"{self.url}/v1/{'chat/completions' if self.chat else 'completions'}", json=body)
        except httpx.HTTPError as e:
            return Answer(None, f"gateway unreachable: {type(e).__name__}: {e}")
        if r.status_code != 200:
            try:
                msg = r.json().get("error", {}).get("message", r.text)
            except (ValueError, AttributeError):
                msg = r.text
            return Answer(None, f"HTTP {r.status_code}: {str(msg)[:200]}")
        try:
            data = r.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or "" if self.chat else choice["text"]
            use = data.get("usage") or {}
            cached = (use.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            return Answer(text, None, int(use.get("prompt_tokens") or 0), int(cached))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            return Answer(None, f"malformed completion response: {e}")

    def begin_statement(self) -> None:
        self._t0, self._t1 = None, 0.0
        self._calls = self._prompt = self._cached = 0

    def report(self) -> dict[str, Any]:
        return usage_report(self._t0, self._t1, self._calls, self._prompt, self._cached)

    def close(self) -> None:
        pass
