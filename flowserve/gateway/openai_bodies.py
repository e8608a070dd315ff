"""The OpenAI wire format's answers as the HTTP face writes them: response bodies, stream
chunks and server-sent events (errors: `flowserve.host.intake.openai_api`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson


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
