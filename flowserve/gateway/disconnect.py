"""Work nobody waits for is cancelled: when a client disconnects mid-request or
mid-stream, the queries its request started are cancelled (`LiveDriver.cancel`: the
core fails them, the engine requests of their running calls are aborted — closing the
engine's stream stops its generation and frees its slot — and their queued calls are
dropped), as vLLM and SGLang abort a request whose client left.

A `ClientWatch` listens on the request's ASGI `receive` once the body has been read:
the server's next message for the request is `http.disconnect`, when the client goes
away or once the response is complete (then cancelling is a no-op: the query ended).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

REASON = "the client disconnected before the answer was complete"

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class ClientWatch:
    """Watches one request's connection; `track` the queries it starts (or, for a
    program's call, the function that cancels that call alone); `stop` when done."""

    def __init__(self, receive: Receive, cancel: Callable[[int, str], None]) -> None:
        self._receive = receive
        self._cancel = cancel
        self._queries: list[int | Callable[[], None]] = []
        self.gone = False
        self._task = asyncio.ensure_future(self._watch())
        # a receive that fails (the server is closing) ends the watch quietly
        self._task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _watch(self) -> None:
        while True:
            msg = await self._receive()
            if msg.get("type") == "http.disconnect":
                break
        self.gone = True
        for target in self._queries:
            self._end(target)

    def track(self, target: int | Callable[[], None]) -> None:
        self._queries.append(target)
        if self.gone:  # it left while the request was being prepared
            self._end(target)

    def _end(self, target: int | Callable[[], None]) -> None:
        if callable(target):
            target()
        else:
            self._cancel(target, REASON)

    def stop(self) -> None:
        self._task.cancel()
