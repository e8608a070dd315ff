"""The OpenAI wire format: errors, response bodies and stream chunks (requests:
`flowserve.gateway.openai_requests`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi.responses import JSONResponse

from flowserve.errors import FailureKind


class APIError(Exception):
    """An error answered with an OpenAI-style body."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    def encoded(self) -> bytes:
        return orjson.dumps(self.body())


MAX_DEPTH = 32  # JSON nesting a request may use; OpenAI bodies need 5


def decode_json(raw: bytes) -> Any:
    """The body as JSON, or a 400: not JSON, not UTF-8, lone surrogates (orjson refuses
    them: they could not be encoded again), or nested deeper than MAX_DEPTH."""
    try:
        data = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError) as e:
        raise APIError(400, f"the request body is not valid JSON: {e}") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and json_depth(data) > MAX_DEPTH:
        raise APIError(400, f"the request body nests JSON deeper than {MAX_DEPTH} levels")
    return data


def json_depth(data: Any) -> int:
    """The nesting depth of decoded JSON (iterative: no recursion limit to hit)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = node.values()
        elif not isinstance(node, list):
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node if isinstance(child, dict | list))
    return deepest


def usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def completion_body(rid: str, model: str, text: str, finish: str, use: dict[str, Any],
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`extra`: the engine's choice beyond its text (`logprobs`), relayed as it is."""
    choice = {"index": 0, "text": text, "logprobs": None, **(extra or {}), "finish_reason": finish}
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": use}


def chat_body(rid: str, model: str, text: str, finish: str, use: dict[str, Any],
              extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`extra`: the engine's choice beyond its text — its `message` (with `tool_calls`)
    and `logprobs` — relayed as it is."""
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, **(extra or {}),
              "finish_reason": finish}
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": use}


def chunk(kind: str, rid: str, model: str, created: int, delta: str | None, finish: str | None,
          first: bool = False, own: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One stream chunk; `own`: the engine's own fields of its answer (its system_fingerprint)."""
    head = {"id": rid, "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
            "created": created, "model": model, **(own or {})}
    if kind == "chat":
        d: dict[str, Any] = {} if delta is None else {"content": delta}
        if first:
            d["role"] = "assistant"
        return {**head, "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}
    return {**head, "choices": [{"index": 0, "text": delta or "", "logprobs": None, "finish_reason": finish}]}


def sse(data: Any) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


class ChunkEncoder:
    """A stream's delta chunks as SSE bytes: everything but the delta is encoded once, so
    each token costs one string encoding (the engine's text, not its whole chunk). A chat
    stream opens with a role-only chunk, as engines and OpenAI send it; the engine's own
    fields (`adopt`: its id, created, system_fingerprint) are the chunks' once known."""

    def __init__(self, kind: str, rid: str, model: str, created: int) -> None:
        self.kind, self.rid, self.model, self.created = kind, rid, model, created
        self.own: dict[str, Any] | None = None  # the engine's fields beyond id and created
        self.opened = kind != "chat"  # a chat's role chunk is still to come
        self._encode_head()

    def adopt(self, own: Mapping[str, Any]) -> None:
        """The engine's own fields of its answer, for every chunk from now on."""
        self.rid, self.created = own.get("id", self.rid), own.get("created", self.created)
        self.own = {k: v for k, v in own.items() if k not in ("id", "created")} or self.own
        self._encode_head()

    def _encode_head(self) -> None:
        body = self._chunk("\x00", None)
        head, _, tail = orjson.dumps(body).partition(b'"\\u0000"')
        self._head, self._tail = b"data: " + head, tail + b"\n\n"

    def _chunk(self, delta: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
        return chunk(self.kind, self.rid, self.model, self.created, delta, finish, first, self.own)

    def _open(self) -> bytes:
        if self.opened:
            return b""
        self.opened = True
        return sse(self._chunk("", None, True))

    def delta(self, text: str) -> bytes:
        return self._open() + self._head + orjson.dumps(text) + self._tail

    def choice(self, fields: Mapping[str, Any]) -> bytes:
        """An engine's choice relayed whole (tool-call deltas, logprobs)."""
        body = self._chunk(None, None)
        body["choices"] = [{"index": 0, **fields, "finish_reason": None}]
        return self._open() + sse(body)

    def final(self, finish: str | None, use: dict[str, Any] | None) -> bytes:
        body = self._chunk(None, finish)
        if use is not None:
            body["usage"] = use
        return self._open() + sse(body)


@dataclass(frozen=True, slots=True)
class HTTPFailure:
    """How a failure kind answers a client."""

    status: int
    type: str
    code: str
    param: str | None = None


_CLIENT, _SERVER = "invalid_request_error", "server_error"

# The one table from what failed to what the client gets (docs/serving.md, "Errors").
FAILURES: Mapping[FailureKind, HTTPFailure] = {
    FailureKind.BAD_REQUEST: HTTPFailure(400, _CLIENT, "invalid_request"),
    FailureKind.CONTEXT_OVERFLOW: HTTPFailure(400, _CLIENT, "context_length_exceeded", "prompt"),
    FailureKind.ENGINE_REJECTED: HTTPFailure(400, _CLIENT, "engine_rejected"),
    FailureKind.UNANSWERABLE: HTTPFailure(422, _CLIENT, "unanswerable"),
    FailureKind.LIMIT: HTTPFailure(429, "rate_limit_error", "limit_exceeded"),
    FailureKind.SHED: HTTPFailure(429, "rate_limit_error", "slo_unattainable"),
    FailureKind.CANCELLED: HTTPFailure(499, _CLIENT, "cancelled"),
    FailureKind.INTERNAL: HTTPFailure(500, _SERVER, "internal_error"),
    FailureKind.APP_ERROR: HTTPFailure(500, _SERVER, "app_error"),
    FailureKind.TOOL_ERROR: HTTPFailure(502, _SERVER, "tool_error"),
    FailureKind.ENGINE_ERROR: HTTPFailure(502, _SERVER, "engine_error"),
    FailureKind.NO_INSTANCE: HTTPFailure(503, _SERVER, "service_unavailable"),
    FailureKind.SHUTDOWN: HTTPFailure(503, _SERVER, "service_unavailable"),
    FailureKind.TIMEOUT: HTTPFailure(504, _SERVER, "timeout"),
}


def failure_error(kind: FailureKind | None, reason: str | None) -> APIError:
    """The HTTP error for a query that failed: its kind through `FAILURES`, its reason as
    the message."""
    f = FAILURES[kind if kind is not None else FailureKind.INTERNAL]
    return APIError(f.status, reason or "failed", f.type, f.code, f.param)
