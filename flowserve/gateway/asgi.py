"""The raw ASGI front of the gateway: the hot OpenAI routes without a framework, the rest
(workflows, admin, metrics) through the FastAPI app behind it.

Every exception ends as an OpenAI-style JSON error: 4xx for bad input (`APIError`), 500
for a bug — then with `Connection: close`, so a pooled client does not send its next
request down a connection the server is about to drop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from types import SimpleNamespace
from typing import Any

from flowserve.gateway.disconnect import ClientWatch
from flowserve.gateway.llm import LLMRoutes, Reply, error_reply
from flowserve.host.intake.intake import ROUTES, SINGLE, too_large
from flowserve.host.intake.openai_api import APIError

log = logging.getLogger("flowserve.gateway")
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_INTERNAL = APIError(500, "internal error", "server_error", "internal_error")


class GatewayASGI:
    """`create_app`'s result: `state.gateway` is the `Gateway` (as on the FastAPI app)."""

    def __init__(self, inner: Any, routes: LLMRoutes, gateway: object) -> None:
        self.inner = inner
        self.routes = routes
        self.host = routes.host
        self.state = SimpleNamespace(gateway=gateway)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self._guarded(self.inner, scope, receive, send)
        twice = repeated(scope)
        if twice is not None:
            name = twice.decode("latin-1")
            return await send_reply(error_reply(APIError(400, f"{name}: sent more than once; send one", param=name)),
                                    send)
        limit = self.routes.host.config.gateway.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:  # refused before a byte of it is read
            return await send_reply(error_reply(too_large(limit)), send)
        kind = ROUTES.get(scope.get("path", ""))
        if kind is None or scope["method"] != "POST":
            return await self._guarded(self.inner, scope, limited(receive, limit), send)
        started = [False]

        async def tracked(msg: MutableMapping[str, Any]) -> None:
            started[0] = True
            await send(msg)

        watch = None
        try:
            raw = await read_body(receive, limit)
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            watch = ClientWatch(receive, self.routes.driver.cancel)
            reply = await self.routes.handle(headers, raw, kind, watch.track)
        except APIError as e:
            reply = error_reply(e)
        except Exception:
            reply = internal_error(scope)
        try:
            await send_reply(reply, tracked)
        except Exception:  # the client went away, or the stream broke after its first byte
            if not started[0]:
                raise
            log.debug("stream ended early", exc_info=True)
        finally:
            if watch is not None:
                watch.stop()

    async def _guarded(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(msg: MutableMapping[str, Any]) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await app(scope, receive, tracked)
        except Exception:
            if scope["type"] != "http" or started:
                raise
            await send_reply(internal_error(scope), send)


def internal_error(scope: Scope) -> Reply:
    """A bug's reply (logged with its traceback): 500, and the connection closes."""
    log.exception("internal error on %s", scope.get("path"))
    reply = error_reply(_INTERNAL)
    reply.headers.append((b"connection", b"close"))
    return reply


def repeated(scope: Scope) -> bytes | None:
    """The first header of `SINGLE` the request sends more than once."""
    seen: set[bytes] = set()
    for k, _ in scope.get("headers", ()):
        if k in SINGLE:
            if k in seen:
                return k
            seen.add(k)
    return None


def _content_length(scope: Scope) -> int | None:
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            return int(v) if v.isdigit() else None  # the server refused malformed ones already
    return None


def limited(receive: Receive, limit: int) -> Receive:
    """`receive` that raises a 413 once more than `limit` body bytes arrived (a chunked
    body declares no length)."""
    size = 0

    async def counted() -> MutableMapping[str, Any]:
        nonlocal size
        msg = await receive()
        size += len(msg.get("body", b""))
        if size > limit:
            raise too_large(limit)
        return msg
    return counted


async def read_body(receive: Receive, limit: int) -> bytes:
    receive = limited(receive, limit)
    msg = await receive()
    body = msg.get("body", b"")
    if not msg.get("more_body"):
        return body
    parts = [body]
    while msg.get("more_body"):
        msg = await receive()
        parts.append(msg.get("body", b""))
    return b"".join(parts)


async def send_reply(reply: Reply, send: Send) -> None:
    if reply.chunks is None:
        headers = [*reply.headers, (b"content-length", str(len(reply.body)).encode())]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
        return
    await send({"type": "http.response.start", "status": reply.status, "headers": reply.headers})
    async for part in reply.chunks:
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
