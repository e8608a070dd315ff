"""The start of an OpenAI request, the same for both faces: its headers and body checked,
parsed and tokenized, and handed to the core as a one-call query or the next call of a
program (`RequestIntake.start`). The HTTP face (`flowserve.gateway.llm`) then relays the
engine's answer; the endpoint picker (`flowserve.picker`) lets its proxy carry it.
Every bad input is an `APIError` — the JSON error both faces answer with — and the
model's context limit is checked here, and only here (`context_room`, `context_fits`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from flowserve.apps.single import SingleCall
from flowserve.engines.backend import TokenSink
from flowserve.errors import FlowserveError
from flowserve.graph.prompt import Chat, Toks
from flowserve.host.intake.offload import LARGE_BODY_BYTES, off_loop
from flowserve.host.intake.openai_api import APIError, decode_json
from flowserve.host.intake.openai_requests import ChatRequest, CompletionRequest, parse
from flowserve.host.intake.program_headers import ProgramHeaders, read_program_headers
from flowserve.host.intake.tenancy import LATENCY_HEADERS, Headers, read_headers
from flowserve.host.query import CallHandle, QueryHandle
from flowserve.host.root import LiveHost
from flowserve.types.work import Tokens, WorkflowRef

ROUTES = {"/v1/completions": "completion", "/v1/chat/completions": "chat"}  # path → the request's kind
# headers read for one value: sent twice, a proxy that checked the first and the host that
# read the last would disagree, so a second one is refused
SINGLE = frozenset({b"authorization", b"x-tenant", b"x-priority", b"x-slo-ms", b"x-slo-ttft-ms", b"x-slo-tpot-ms",
                    b"x-flowserve-class",
                    b"x-flowserve-program", b"x-flowserve-stage", b"x-flowserve-thread", b"content-type"})
MAX_TOKEN_ID = 2**31 - 1  # engines' vocabularies are int32
OnQuery = Callable[[int | Callable[[], None]], None]  # a query id, or how to cancel a program's call


@dataclass(frozen=True)
class StartedRequest:
    """A request the core took: its handle, the header that names it, its model and body."""

    handle: QueryHandle | CallHandle
    id_header: tuple[bytes, bytes]
    model: str
    request: ChatRequest | CompletionRequest


def too_large(limit: int) -> APIError:
    return APIError(413, f"the request body exceeds {limit} bytes (gateway.max_body_bytes)",
                    code="request_too_large")


def context_room(limit: int | None, max_tokens: int) -> None:
    """The cheap half of the context check, before tokenizing: the completion leaves room
    for a prompt (else a 400)."""
    if limit is not None and max_tokens >= limit:
        raise APIError(400, f"max_tokens: {max_tokens} tokens for the completion leave no room for a prompt in "
                            f"this model's maximum context length of {limit} tokens",
                       code="context_length_exceeded", param="max_tokens")


def context_fits(limit: int | None, prompt_tokens: int, max_tokens: int) -> None:
    """The prompt and the completion fit the model's context (else a 400, as OpenAI's)."""
    if limit is not None and prompt_tokens + max_tokens > limit:
        raise APIError(400, f"this model's maximum context length is {limit} tokens, but "
                            f"{prompt_tokens + max_tokens} were requested ({prompt_tokens} in the prompt, "
                            f"{max_tokens} for the completion)", code="context_length_exceeded", param="prompt")


def _parsed(kind: str, raw: bytes, max_messages: int, max_tools: int
            ) -> tuple[ChatRequest | CompletionRequest, Chat | None]:
    """The request and its chat; the message and tool counts are checked before anything
    else is (a 400 for 50,000 messages or 2,000 tools costs their JSON decoding, not their
    validation)."""
    body = decode_json(raw)
    if kind != "chat":
        return parse(CompletionRequest, body), None
    if isinstance(body, dict):
        for field, limit, setting in (("messages", max_messages, "max_messages"), ("tools", max_tools, "max_tools")):
            items = body.get(field)
            if isinstance(items, list) and len(items) > limit:
                raise APIError(400, f"{field}: {len(items)} {field}; at most {limit} in one request "
                                    f"(gateway.{setting})", param=field)
    req = parse(ChatRequest, body)
    return req, req.chat()


def _ids_in_range(ids: list[int]) -> bool:
    return all(0 <= t <= MAX_TOKEN_ID for t in ids)


class RequestIntake:
    def __init__(self, host: LiveHost) -> None:
        self.host = host
        self.driver = host.driver

    async def start(self, headers: Mapping[str, str], raw: bytes, kind: str,
                    sink_for: Callable[[bool], TokenSink | None], on_query: OnQuery | None = None,
                    sent_as: Headers | None = None) -> StartedRequest:
        """Check, parse and tokenize a request and hand it to the core: a one-call query, or
        the next call of a program. `sink_for(stream)` gives the call's sink; `on_query`
        learns the id of the query the request started, or for a program's call how to
        cancel that call alone (what to do when the client leaves); `sent_as`: who sends a
        request that the host itself makes for a tenant (a batch's line), instead of the
        headers' key. Raises `APIError` for what the client gets instead."""
        host = self.host
        settings = host.config.gateway
        hdr = sent_as or read_headers(headers, host.config.keys)
        ph = None if sent_as is not None else read_program_headers(headers)
        if ph is not None and hdr.latency_slo is not None:  # refused, never silently dropped
            bad = next(n for n in LATENCY_HEADERS if n in headers)
            raise APIError(400, f"{bad}: a program's calls do not carry latency objectives yet", param=bad)
        req, chat = await off_loop(len(raw) > LARGE_BODY_BYTES, _parsed, kind, raw, settings.max_messages,
                                   settings.max_tools)
        model = host.model_of(req.model)
        max_tokens = req.max_output_tokens() or settings.default_max_tokens
        limit = self.driver.max_context(model)
        context_room(limit, max_tokens)
        try:  # a chat is rendered as its engine will render it; the core routes by those tokens
            ids = await (self.driver.tokens.chat(chat, model) if chat is not None
                         else self._prompt_ids(req.prompt, model))
        except FlowserveError as e:
            raise APIError(503, f"cannot tokenize the prompt: {e}", "server_error", "service_unavailable") from None
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        context_fits(limit, len(ids), max_tokens)
        prompt = tuple(ids) if chat is None else dataclasses.replace(chat, ids=tuple(ids))  # ids travel with it
        h, qid = await self._start(kind, headers, hdr, ph, prompt, max_tokens, model, req.params(),
                                   sink_for(req.stream), on_query)
        return StartedRequest(h, qid, model, req)

    async def _start(self, kind: str, headers: Mapping[str, str], hdr: Headers, ph: ProgramHeaders | None,
                     prompt: Tokens | Chat, max_tokens: int, model: str, params: Mapping[str, Any],
                     sink: TokenSink | None, on_query: OnQuery | None
                     ) -> tuple[QueryHandle | CallHandle, tuple[bytes, bytes]]:
        """A one-call query, or the next call of a program; the header that names it."""
        programs = self.host.programs
        if ph is not None:
            parts = (prompt if isinstance(prompt, Chat) else Toks(prompt),)
            ch = await programs.call(ph, hdr, headers, ph.stage or kind, parts, max_tokens, model, params, sink)
            if on_query is not None:
                on_query(lambda: programs.cancel(ch))
            return ch, (b"x-flowserve-program", ph.program.encode())
        ref = WorkflowRef(SingleCall.name, (kind, prompt, max_tokens, model, MappingProxyType(params)))
        h = self.driver.new_query(kind, ref, model, hdr.tenant, hdr.priority, hdr.slo_s, sink=sink, cls=hdr.cls,
                                  latency_slo=hdr.latency_slo)
        await self.host.submit(h)
        if on_query is not None:
            on_query(h.id)
        return h, (b"x-flowserve-query-id", h.ref.encode())

    def abandon(self, h: QueryHandle | CallHandle) -> None:
        """Its client went away: a program's call is cancelled alone."""
        if isinstance(h, CallHandle):
            self.host.programs.cancel(h)

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
