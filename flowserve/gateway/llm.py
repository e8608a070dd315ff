"""The OpenAI LLM routes (`/v1/completions`, `/v1/chat/completions`) without a web
framework: headers and body bytes in, a `Reply` out (JSON bytes, or a stream of SSE
bytes). The raw ASGI front (`flowserve.gateway.asgi`) serves them; the request is
checked, parsed and handed to the core by the host's intake
(`flowserve.host.intake.intake`), and every bad input is an `APIError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowserve.engines.backend import EngineFields, TokenSink
from flowserve.gateway.openai_bodies import SSE_DONE, ChunkEncoder, chat_body, completion_body, sse, usage
from flowserve.host.intake.intake import OnQuery, RequestIntake
from flowserve.host.intake.openai_api import APIError, failure_error
from flowserve.host.query import CallHandle, QueryHandle
from flowserve.host.root import LiveHost

_END = object()
Headers = list[tuple[bytes, bytes]]


@dataclass
class Reply:
    """What the ASGI front sends: `body` (JSON) or `chunks` (an SSE stream)."""

    status: int = 200
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None


def json_reply(data: Any, status: int = 200, headers: Headers | None = None) -> Reply:
    return Reply(status, [(b"content-type", b"application/json"), *(headers or [])], orjson.dumps(data))


def error_reply(e: APIError) -> Reply:
    extra = [(k.lower().encode(), str(v).encode()) for k, v in e.headers.items()]
    return Reply(e.status, [(b"content-type", b"application/json"), *extra], e.encoded())


class LLMRoutes:
    def __init__(self, host: LiveHost) -> None:
        self.host = host
        self.driver = host.driver
        self.intake = RequestIntake(host)

    async def handle(self, headers: Mapping[str, str], raw: bytes, kind: str,
                     on_query: OnQuery | None = None) -> Reply:
        """`on_query` learns the id of the query the request started, or for a program's
        call how to cancel that call alone (what to do when the client leaves)."""
        queue: asyncio.Queue[Any] | None = None

        def sink_for(stream: bool) -> TokenSink | None:
            nonlocal queue
            if not stream:
                return None
            queue = asyncio.Queue()
            return TokenSink(queue.put_nowait)

        s = await self.intake.start(headers, raw, kind, sink_for, on_query)
        h, qid, model, req = s.handle, s.id_header, s.model, s.request
        rid = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{h.ref}"  # unless the engine names its answer
        if queue is not None:
            h.done.add_done_callback(lambda _f: queue.put_nowait(_END))
            # the headers wait for the routing decision, so they can name the instance
            await asyncio.wait([h.routed, h.done], return_when=asyncio.FIRST_COMPLETED)
            instance = h.routed.result() if h.routed.done() else ""
            return Reply(200, [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), qid,
                               (b"x-flowserve-instance", instance.encode())],
                         chunks=self._stream(ChunkEncoder(kind, rid, model, int(time.time())), queue, h,
                                             req.include_usage()))
        try:
            result = await asyncio.shield(h.done)  # a cancelled wait leaves the answer's future alone
        except asyncio.CancelledError:  # the client went away
            self.abandon(h)
            raise
        if not result.completed:
            return error_reply(failure_error(result.kind, result.reason))
        call = result.calls[-1]
        use = usage(call.prompt_tokens, call.output_tokens, call.cached_tokens)
        make = chat_body if kind == "chat" else completion_body
        body = make(rid, model, call.text, call.finish_reason, use, call.extra)
        return json_reply({**body, **(h.engine or {})},  # the engine's own id, created and fingerprint
                          headers=[(b"x-flowserve-instance", call.instance.encode()), qid])

    def abandon(self, h: QueryHandle | CallHandle) -> None:
        """Its client went away: a program's call is cancelled alone."""
        self.intake.abandon(h)

    async def _stream(self, enc: ChunkEncoder, queue: asyncio.Queue[Any], h: QueryHandle | CallHandle,
                      include_usage: bool) -> AsyncIterator[bytes]:
        try:
            async for part in self._chunks(enc, queue, h, include_usage):
                yield part
        finally:
            if not h.done.done():  # the client stopped reading
                self.abandon(h)

    async def _chunks(self, enc: ChunkEncoder, queue: asyncio.Queue[Any], h: QueryHandle | CallHandle,
                      include_usage: bool) -> AsyncIterator[bytes]:
        # every delta already queued goes out in one write: a token per syscall and loop
        # turn is what made relaying cost more than routing
        ended = False
        while not ended:
            parts = []
            item = await queue.get()
            while True:
                if item is _END:
                    ended = True
                    break
                if isinstance(item, str):
                    parts.append(enc.delta(item))
                elif isinstance(item, EngineFields):
                    enc.adopt(item.fields)
                else:
                    parts.append(enc.choice(item))
                if queue.empty():
                    break
                item = queue.get_nowait()
            if parts:
                yield b"".join(parts)
        result = h.done.result()
        if result.completed:
            call = result.calls[-1]
            use = usage(call.prompt_tokens, call.output_tokens, call.cached_tokens) if include_usage else None
            yield enc.final(call.finish_reason, use)
        else:  # in-band: the status line went out with the first byte
            yield sse(failure_error(result.kind, result.reason).body())
        yield SSE_DONE

