"""The two chores of a bare ASGI app (the simulated engine server, the instant backend,
the tests' HTTP engines): answering the lifespan protocol and reading a whole body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


async def serve_lifespan(receive: Receive, send: Send) -> None:
    """Start-up and shutdown complete at once (nothing to set up)."""
    while (msg := await receive())["type"] != "lifespan.shutdown":
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


async def read_body(receive: Receive) -> bytes:
    """The request's body, all its chunks."""
    raw = b""
    while True:
        msg = await receive()
        raw += msg.get("body", b"")
        if not msg.get("more_body"):
            return raw
