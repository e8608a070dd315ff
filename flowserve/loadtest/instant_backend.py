"""An instant OpenAI-compatible engine for `flowserve bench gateway`, run in its own
process: `python -m flowserve.loadtest.instant_backend PORT`. It answers at once — a fixed
completion, or `STREAM_TOKENS` SSE chunks when asked to stream — so a router in front of
it measures nothing but its own cost. Raw ASGI on uvicorn with uvloop and httptools.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from flowserve.engines.raw_asgi import read_body, serve_lifespan

STREAM_TOKENS = 64
_USAGE = {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}}
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def _body(stream: bool, chat: bool) -> list[bytes]:
    if not stream:
        choice = ({"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}
                  if chat else {"index": 0, "text": "ok", "logprobs": None, "finish_reason": "length"})
        return [orjson.dumps({"id": "x", "object": "chat.completion" if chat else "text_completion",
                              "created": 0, "model": "instant", "choices": [choice], "usage": _USAGE})]
    out = []
    for i in range(STREAM_TOKENS):
        delta = {"delta": {"content": " tok"}} if chat else {"text": " tok"}
        out.append(b"data: " + orjson.dumps({"id": "x", "object": "chat.completion.chunk" if chat else
                                             "text_completion", "created": 0, "model": "instant",
                                             "choices": [{"index": 0, **delta, "finish_reason": None}]}) + b"\n\n")
        del i
    usage = {**_USAGE, "completion_tokens": STREAM_TOKENS, "total_tokens": 8 + STREAM_TOKENS}
    out.append(b"data: " + orjson.dumps({"id": "x", "object": "text_completion", "created": 0, "model": "instant",
                                         "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                                         "usage": usage}) + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


_BODIES = {(s, c): _body(s, c) for s in (False, True) for c in (False, True)}
_TOKENS = orjson.dumps({"tokens": list(range(100, 108))})
_MODELS = orjson.dumps({"object": "list", "data": [{"id": "instant", "object": "model"}]})


async def app(scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
              send: Callable[[Any], Awaitable[None]]) -> None:
    if scope["type"] == "lifespan":
        return await serve_lifespan(receive, send)
    raw = await read_body(receive)
    path = scope["path"]
    if path in ("/v1/completions", "/v1/chat/completions", "/generate"):
        stream = b'"stream":true' in raw or b'"stream": true' in raw
        parts = _BODIES[stream, path.endswith("chat/completions")]
        if not stream:
            return await _send(send, 200, _JSON, parts[0])
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        await send({"type": "http.response.body", "body": b"".join(parts)})
        return
    if path == "/tokenize":
        return await _send(send, 200, _JSON, _TOKENS)
    if path in ("/health", "/health_generate"):
        return await _send(send, 200, _JSON, b"{}")
    if path in ("/v1/models", "/get_model_info", "/get_server_info"):
        return await _send(send, 200, _JSON, _MODELS)
    await _send(send, 404, _JSON, b'{"error": {"message": "not found", "code": 404}}')


async def _send(send: Callable[[Any], Awaitable[None]], status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="uvloop", http="httptools",
                log_level="warning", access_log=False)
