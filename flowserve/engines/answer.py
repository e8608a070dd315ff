"""What an engine answers: a `CompletionResult` folded from an SSE stream or one JSON
body, and `EngineError`s that say whether trying again (elsewhere) may help."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from flowserve.errors import FlowserveError


class EngineError(FlowserveError):
    """A failed engine request; `retryable` says whether trying again (elsewhere) may help."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


def retryable_status(status: int) -> bool:
    """5xx, 408 (timeout) and 429 (overloaded) may succeed later; other 4xx never will."""
    return status >= 500 or status in (408, 429)


@dataclass(frozen=True)
class CompletionResult:
    text: str
    output_tokens: int
    prompt_tokens: int | None
    cached_tokens: int | None  # None: the engine does not report it
    started: float  # time.monotonic() when the request was sent
    first_token: float | None  # first streamed content (None for non-streamed requests)
    finished: float
    finish_reason: str | None = None
    model: str | None = None
    timings: Mapping[str, Any] | None = None  # llama-server's own timings, if any
    # the answer beyond its text, as the engine gave it: a chat's `message` (with any
    # `tool_calls`), `logprobs` (None for streams: their deltas went to `on_chunk`)
    extra: Mapping[str, Any] | None = None
    own: Mapping[str, Any] | None = None  # what the engine says of its answer: `OWN_FIELDS`

    @property
    def latency(self) -> float:
        return self.finished - self.started

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.started

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first."""
        if self.first_token is None or self.output_tokens < 2:
            return None
        return (self.finished - self.first_token) / (self.output_tokens - 1)


OWN_FIELDS = ("id", "created", "system_fingerprint")  # an answer's own fields, relayed to the client as they are


def own_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The `OWN_FIELDS` an engine's answer (or stream chunk) sets."""
    return {k: data[k] for k in OWN_FIELDS if data.get(k) is not None}


class Accumulator:
    """Folds streamed chunks (or one whole response) into a CompletionResult."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first_token: float | None = None
        self.parts: list[str] = []
        self.chunks_with_content = 0
        self.usage: Mapping[str, Any] | None = None
        self.timings: Mapping[str, Any] | None = None
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.extra: dict[str, Any] | None = None
        self.own: dict[str, Any] | None = None

    def add(self, data: Mapping[str, Any], now: float | None) -> None:
        if "error" in data:
            raise error_from_body(data, None)
        if self.own is None:
            self.own = own_fields(data) or None
        self.model = data.get("model", self.model)
        self.usage = data.get("usage") or self.usage
        self.timings = data.get("timings") or self.timings
        for choice in data.get("choices") or ():
            text = choice.get("text")
            msg = choice.get("delta") or choice.get("message") or {}
            if text is None:
                text = msg.get("content")
            if text is not None or msg.get("tool_calls"):
                if now is not None and self.first_token is None:
                    self.first_token = now
                if text or msg.get("tool_calls"):
                    self.chunks_with_content += 1
                self.parts.append(text or "")
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            if now is None:  # a whole answer: keep what it says beyond its text
                extra = {k: v for k, v in choice.items() if k not in ("index", "finish_reason", "text")}
                self.extra = {k: v for k, v in extra.items() if v is not None} or None

    def result(self, finished: float) -> CompletionResult:
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        if cached is None and self.timings and "cache_n" in self.timings:
            cached = self.timings["cache_n"]
        output = usage.get("completion_tokens")
        return CompletionResult(
            text="".join(self.parts),
            output_tokens=int(output) if output is not None else self.chunks_with_content,
            prompt_tokens=usage.get("prompt_tokens"),
            cached_tokens=None if cached is None else int(cached),
            started=self.started, first_token=self.first_token, finished=finished,
            finish_reason=self.finish_reason, model=self.model, timings=self.timings, extra=self.extra,
            own=self.own)


def error_from_body(body: Any, status: int | None) -> EngineError:
    """OpenAI-style {"error": {"message", "code"}} (or anything else) → EngineError."""
    message, code = str(body)[:300], status
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        err = body["error"]
        message = str(err.get("message", message))
        if isinstance(err.get("code"), int):
            code = code or err["code"]
    elif isinstance(body, Mapping) and "message" in body:
        message = str(body["message"])
    retry = retryable_status(code) if code is not None else True
    return EngineError(f"engine error {code}: {message}" if code else f"engine error: {message}",
                       retryable=retry, status=code)


def json_or_error_raw(status: int, raw: bytes, url: str) -> Any:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = {"message": raw[:300].decode(errors="replace")}
        if status < 400:
            raise EngineError(f"{url}: response is not JSON: {raw[:100]!r}", retryable=False, status=status) from None
    if status >= 400:
        raise error_from_body(data, status)
    return data


def json_or_error(resp: httpx.Response) -> Any:
    return json_or_error_raw(resp.status_code, resp.content, str(resp.request.url))
