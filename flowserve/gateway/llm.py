"""The OpenAI LLM routes (`/v1/completions`, `/v1/chat/completions`) without a web
framework: headers and body bytes in, a `Reply` out (JSON bytes, or a stream of SSE
bytes). The raw ASGI front (`flowserve.gateway.asgi`) serves them; validation happens
once, here (orjson, then one pydantic model), and every bad input is an `APIError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import orjson

from flowserve.apps.single import SingleCall
from flowserve.engines.backend import EngineFields, TokenSink
from flowserve.errors import FlowserveError
from flowserve.gateway import tenancy
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.offload import LARGE_BODY_BYTES, off_loop
from flowserve.gateway.openai_api import (
    SSE_DONE,
    APIError,
    ChunkEncoder,
    chat_body,
    completion_body,
    decode_json,
    failure_error,
    sse,
    usage,
)
from flowserve.gateway.openai_requests import ChatRequest, CompletionRequest, parse
from flowserve.gateway.program_headers import ProgramHeaders, read_program_headers
from flowserve.gateway.programs import ProgramBook
from flowserve.gateway.query import CallHandle, QueryHandle
from flowserve.gateway.settings import ServeConfig
from flowserve.gateway.tenancy import read_headers
from flowserve.graph.prompt import Chat, Toks
from flowserve.types.work import Tokens, WorkflowRef


class LLMHost(Protocol):
    """What the LLM routes use of the gateway (`flowserve.gateway.app.Gateway`)."""

    config: ServeConfig
    driver: LiveDriver
    programs: ProgramBook

    def check_key_header(self, auth: str, keys: Sequence[str]) -> None: ...
    def model_of(self, name: str) -> str: ...
    def check_context(self, model: str, prompt_tokens: int, max_tokens: int) -> None: ...
    async def submit(self, h: QueryHandle) -> None: ...

OnQuery = Callable[[int | Callable[[], None]], None]  # a query id, or how to cancel a program's call
MAX_TOKEN_ID = 2**31 - 1  # engines' vocabularies are int32
_END = object()
Headers = list[tuple[bytes, bytes]]


@dataclass
class Reply:
    """What the ASGI front sends: `body` (JSON) or `chunks` (an SSE stream)."""

    status: int = 200
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None


@dataclass(frozen=True)
class Started:
    """A request the core took: its handle, the header that names it, its model and body."""

    handle: QueryHandle | CallHandle
    id_header: tuple[bytes, bytes]
    model: str
    request: ChatRequest | CompletionRequest


def json_reply(data: Any, status: int = 200, headers: Headers | None = None) -> Reply:
    return Reply(status, [(b"content-type", b"application/json"), *(headers or [])], orjson.dumps(data))


def error_reply(e: APIError) -> Reply:
    extra = [(k.lower().encode(), str(v).encode()) for k, v in e.headers.items()]
    return Reply(e.status, [(b"content-type", b"application/json"), *extra], e.encoded())


def _parsed(kind: str, raw: bytes, max_messages: int) -> tuple[ChatRequest | CompletionRequest, Chat | None]:
    """The request and its chat; the message count is checked before anything else is
    (a 400 for 50,000 messages costs their JSON decoding, not their validation)."""
    body = decode_json(raw)
    if kind != "chat":
        return parse(CompletionRequest, body), None
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list) and len(messages) > max_messages:
        raise APIError(400, f"messages: {len(messages)} messages; at most {max_messages} in one request "
                            f"(gateway.max_messages)", param="messages")
    req = parse(ChatRequest, body)
    return req, req.chat()


def _ids_in_range(ids: list[int]) -> bool:
    return all(0 <= t <= MAX_TOKEN_ID for t in ids)


class LLMRoutes:
    def __init__(self, gw: LLMHost) -> None:
        self.gw = gw
        self.driver = gw.driver

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

        s = await self.start(headers, raw, kind, sink_for, on_query)
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

    async def start(self, headers: Mapping[str, str], raw: bytes, kind: str,
                    sink_for: Callable[[bool], TokenSink | None], on_query: OnQuery | None = None) -> Started:
        """Check, parse and tokenize a request and hand it to the core: a one-call query, or
        the next call of a program. `sink_for(stream)` gives the call's sink. The gateway
        then relays the engine's answer; the endpoint picker (`flowserve.picker`) lets its
        proxy carry it. Raises `APIError` for what the client gets instead."""
        gw = self.gw
        hdr = read_headers(headers, gw.config.keys)
        ph = read_program_headers(headers)
        req, chat = await off_loop(len(raw) > LARGE_BODY_BYTES, _parsed, kind, raw, gw.config.gateway.max_messages)
        model = gw.model_of(req.model)
        max_tokens = req.max_output_tokens() or gw.config.gateway.default_max_tokens
        limit = self.driver.max_context(model)
        if limit is not None and max_tokens >= limit:  # the cheap half of the context check: before tokenizing
            raise APIError(400, f"max_tokens: {max_tokens} tokens for the completion leave no room for a prompt in "
                                f"this model's maximum context length of {limit} tokens",
                           code="context_length_exceeded", param="max_tokens")
        try:  # a chat is rendered as its engine will render it; the core routes by those tokens
            ids = await (self.driver.tokens.chat(chat, model) if chat is not None
                         else self._prompt_ids(req.prompt, model))
        except FlowserveError as e:
            raise APIError(503, f"cannot tokenize the prompt: {e}", "server_error", "service_unavailable") from None
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        gw.check_context(model, len(ids), max_tokens)
        prompt = tuple(ids) if chat is None else dataclasses.replace(chat, ids=tuple(ids))  # ids travel with it
        h, qid = await self._start(kind, headers, hdr, ph, prompt, max_tokens, model, req.params(),
                                   sink_for(req.stream), on_query)
        return Started(h, qid, model, req)

    async def _start(self, kind: str, headers: Mapping[str, str], hdr: tenancy.Headers, ph: ProgramHeaders | None,
                     prompt: Tokens | Chat, max_tokens: int, model: str, params: Mapping[str, Any],
                     sink: TokenSink | None, on_query: OnQuery | None
                     ) -> tuple[QueryHandle | CallHandle, tuple[bytes, bytes]]:
        """A one-call query, or the next call of a program; the header that names it."""
        if ph is not None:
            parts = (prompt if isinstance(prompt, Chat) else Toks(prompt),)
            ch = await self.gw.programs.call(ph, hdr, headers, ph.stage or kind, parts, max_tokens, model, params,
                                             sink)
            if on_query is not None:
                on_query(lambda: self.gw.programs.cancel(ch))
            return ch, (b"x-flowserve-program", ph.program.encode())
        ref = WorkflowRef(SingleCall.name, (kind, prompt, max_tokens, model, MappingProxyType(params)))
        h = self.driver.new_query(kind, ref, model, hdr.tenant, hdr.priority, hdr.slo_s, sink=sink, cls=hdr.cls,
                                  latency_slo=hdr.latency_slo)
        await self.gw.submit(h)
        if on_query is not None:
            on_query(h.id)
        return h, (b"x-flowserve-query-id", h.ref.encode())

    def abandon(self, h: QueryHandle | CallHandle) -> None:
        """Its client went away: a program's call is cancelled alone."""
        if isinstance(h, CallHandle):
            self.gw.programs.cancel(h)

    async def _prompt_ids(self, prompt: Any, model: str) -> list[int]:
        if isinstance(prompt, str):
            return await self.driver.tokenize(prompt, model)
        if prompt and isinstance(prompt[0], str | list):
            if len(prompt) != 1:
                raise APIError(400, "prompt: batched prompts are not supported; send one prompt per request",
                               param="prompt")
            return await self._prompt_ids(prompt[0], model)
        if not await off_loop(len(prompt) > LARGE_BODY_BYTES // 8, _ids_in_range, prompt):
            raise APIError(400, f"prompt: token ids must lie in [0, {MAX_TOKEN_ID}]", param="prompt")
        return list(prompt)

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

