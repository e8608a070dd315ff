"""Simulated engines behind real HTTP: `python -m flowserve.engines.sim_server SPEC.json`.

The simulator's engine model (`flowserve.engines.simbackend`: continuous batching, the
prefix cache, evictions) advanced in real time, `time_scale` times faster than the GPU it
models, each instance on its own port of 127.0.0.1 with the OpenAI endpoints an engine
has: `/v1/completions` (token ids or text, streamed or not; usage with
`prompt_tokens_details.cached_tokens` as vLLM reports it), `/tokenize`, `/health`,
`/v1/models`. Several gateways (replicas) can route to the same engines — what
`flowserve bench replicas` needs, since an in-process `backend: sim` engine belongs to
one gateway. SPEC.json: `{"time_scale": 4, "instances": [{"name", "gpu", "model", "port"}]}`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson
import uvicorn

from flowserve.engines.backend import EngineError, EngineRequest
from flowserve.engines.raw_asgi import read_body, serve_lifespan
from flowserve.engines.simbackend import SimBackend
from flowserve.profiles.instance import kv_capacity, roofline_for
from flowserve.tokenize.words import word_ids
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
MAX_PROMPT = 1 << 20


class SimEngineApp:
    """One simulated instance as a raw ASGI app."""

    def __init__(self, spec: InstanceSpec, time_scale: float) -> None:
        self.spec = spec
        self.scale = time_scale
        self.backend: SimBackend | None = None  # made in the serving loop
        self._ids = itertools.count(1)

    def _engine(self) -> SimBackend:
        if self.backend is None:
            self.backend = SimBackend(self.spec, roofline_for(self.spec), kv_capacity(self.spec), self.scale,
                                      lambda ev: None, time.monotonic, report_evictions=False)
        return self.backend

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] == "lifespan":
            return await serve_lifespan(receive, send)
        raw = await read_body(receive)
        path = scope["path"]
        try:
            if path == "/v1/completions":
                return await self._complete(orjson.loads(raw or b"{}"), send)
            if path == "/tokenize":
                body = orjson.loads(raw or b"{}")
                tokens = list(word_ids(str(body.get("content", body.get("prompt", "")))))
                return await _send(send, 200, orjson.dumps({"tokens": tokens}))
        except (orjson.JSONDecodeError, ValueError, TypeError) as e:
            return await _send(send, 400, orjson.dumps({"error": {"message": str(e), "type": "invalid_request"}}))
        if path in ("/health", "/v1/health"):
            return await _send(send, 200, b"{}")
        if path == "/v1/models":
            return await _send(send, 200, orjson.dumps({"object": "list", "data": [{"id": self.spec.model}]}))
        await _send(send, 404, b'{"error": {"message": "not found"}}')

    async def _complete(self, body: dict[str, Any], send: Callable[[Any], Awaitable[None]]) -> None:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt = list(word_ids(prompt))
        if not isinstance(prompt, list) or not 0 < len(prompt) <= MAX_PROMPT \
                or not all(isinstance(t, int) for t in prompt):
            raise ValueError("prompt: expected text or a non-empty list of token ids")
        max_tokens = int(body.get("max_tokens") or 16)
        if not 0 < max_tokens <= 1 << 16:
            raise ValueError("max_tokens: expected 1 to 65536")
        cid = next(self._ids)
        call = LLMCall(cid, cid, "n", "s", "w", tuple(prompt), max_tokens, max_tokens)
        try:
            out = await self._engine().begin(call, EngineRequest(max_tokens, True))
        except EngineError as e:
            return await _send(send, 503, orjson.dumps({"error": {"message": str(e)}}))
        usage = {"prompt_tokens": len(prompt), "completion_tokens": out.output_tokens,
                 "total_tokens": len(prompt) + out.output_tokens,
                 "prompt_tokens_details": {"cached_tokens": out.cached_tokens}}
        choice = {"index": 0, "text": out.text, "logprobs": None, "finish_reason": "length"}
        answer = {"id": f"cmpl-{cid}", "object": "text_completion", "created": int(time.time()),
                  "model": self.spec.model, "choices": [choice], "usage": usage}
        if not body.get("stream"):
            return await _send(send, 200, orjson.dumps(answer))
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        last = {**answer, "choices": [{**choice, "text": ""}]}
        events = [{**answer, "choices": [{**choice, "finish_reason": None}], "usage": None}, last]
        data = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": data})


async def _send(send: Callable[[Any], Awaitable[None]], status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def serve(spec: dict[str, Any]) -> None:
    scale = float(spec.get("time_scale", 1.0))
    servers = []
    for inst in spec["instances"]:
        app = SimEngineApp(InstanceSpec(inst["name"], inst["gpu"], inst["model"], int(inst.get("tp", 1))), scale)
        config = uvicorn.Config(app, host="127.0.0.1", port=int(inst["port"]), loop="uvloop", http="httptools",
                                log_level="warning", access_log=False, lifespan="on")
        servers.append(uvicorn.Server(config))
    await asyncio.gather(*(s.serve() for s in servers))


if __name__ == "__main__":
    asyncio.run(serve(json.loads(Path(sys.argv[1]).read_text())))
