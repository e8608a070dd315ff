"""A small OpenAI-compatible engine over HTTP on 127.0.0.1, for the tests of flowserve behind
Envoy: each answer names the engine (`x-engine`), so a test sees where a request really
ran. Tokens are the prompt's UTF-8 bytes (`/tokenize`, also for chats: the messages'
JSON), so the gateway's and the picker's token ids agree with the engine's. A closed
gate holds every answer until it opens (`hold()`, `release()`); a failing engine answers
500 (`fail()`); `wait_arrived(n)` waits until n requests reached the engine. Answers: JSON
with usage, or SSE with one event per output token and, when asked
(`stream_options.include_usage`), a usage event.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from flowserve.engines.raw_asgi import read_body, serve_lifespan
from flowserve.gateway.server import BackgroundServer

Scope = MutableMapping[str, Any]


def _tokens(body: dict[str, Any]) -> list[int]:
    if "messages" in body:
        return list(orjson.dumps(body["messages"]))
    prompt = body.get("prompt", body.get("content", ""))
    if isinstance(prompt, list):
        return [int(t) for t in prompt]
    return list(str(prompt).encode())


class HttpEngine:
    def __init__(self, name: str, model: str = "llama-3.1-8b", output_tokens: int = 4) -> None:
        self.name = name
        self.model = model
        self.output_tokens = output_tokens
        self.bodies: list[dict[str, Any]] = []
        self._open = threading.Event()
        self._open.set()
        self._failing = threading.Event()
        self._arrived = threading.Condition()

        async def app(scope: Scope, receive: Callable[[], Awaitable[Any]],
                      send: Callable[[Any], Awaitable[None]]) -> None:
            await self._app(scope, receive, send)  # a plain function: uvicorn takes bound methods for ASGI 2

        self._server = BackgroundServer(app, graceful_s=1.0)
        self.url = self._server.url
        self.endpoint = f"127.0.0.1:{self._server.port}"

    # ------------------------------------------------------------------ control

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def fail(self) -> None:
        """Every completion from now on is a 500 (its body still counts as arrived)."""
        self._failing.set()

    def completions(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if "max_tokens" in b or "messages" in b or "prompt" in b]

    def wait_arrived(self, n: int, timeout_s: float = 30.0) -> None:
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.bodies) >= n, timeout_s):
                raise TimeoutError(f"{self.name}: {len(self.bodies)} of {n} requests arrived")

    def __enter__(self) -> HttpEngine:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._open.set()
        self._server.stop()

    # ------------------------------------------------------------------ the app

    async def _app(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                   send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        raw = await read_body(receive)
        path = scope["path"]
        if path in ("/health", "/v1/models"):
            return await self._json(send, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
        body = orjson.loads(raw) if raw else {}
        if path == "/tokenize":
            return await self._json(send, {"tokens": _tokens(body)})
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return await self._json(send, {"error": {"message": "not found"}}, 404)
        with self._arrived:
            self.bodies.append(body)
            self._arrived.notify_all()
        if self._failing.is_set():
            return await self._json(send, {"error": {"message": f"{self.name} failed", "type": "server_error"}}, 500)
        if not self._open.is_set():
            await asyncio.get_running_loop().run_in_executor(None, self._open.wait)
        chat = path.endswith("chat/completions")
        prompt = len(_tokens(body))
        n = min(self.output_tokens, int(body.get("max_tokens") or self.output_tokens))
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        obj = "chat.completion" if chat else "text_completion"
        if not body.get("stream"):
            choice = ({"index": 0, "message": {"role": "assistant", "content": " ok" * n}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": " ok" * n, "finish_reason": "length"})
            return await self._json(send, {"id": "x", "object": obj, "model": self.model, "choices": [choice],
                                           "usage": usage})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"x-engine", self.name.encode())]})
        for _ in range(n):
            delta = {"delta": {"content": " ok"}} if chat else {"text": " ok"}
            event = {"id": "x", "object": obj + (".chunk" if chat else ""), "model": self.model,
                     "choices": [{"index": 0, **delta, "finish_reason": None}]}
            await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(event) + b"\n\n",
                        "more_body": True})
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {"id": "x", "object": obj, "model": self.model, "choices": [], "usage": usage}
            await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(last) + b"\n\n",
                        "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    async def _json(self, send: Callable[[Any], Awaitable[None]], data: Any, status: int = 200) -> None:
        raw = orjson.dumps(data)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                                (b"x-engine", self.name.encode())]})
        await send({"type": "http.response.body", "body": raw})
