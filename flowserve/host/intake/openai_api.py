"""The OpenAI wire format's errors, shared by both faces: `APIError` (a refusal with
OpenAI's error body), the request body's JSON decoding, and the one table from what failed
to what the client gets (`FAILURES`). Requests: `flowserve.host.intake.openai_requests`;
response bodies and stream chunks: `flowserve.gateway.openai_bodies`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

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
