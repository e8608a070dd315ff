"""A scripted OpenAI-compatible engine over HTTP on 127.0.0.1, for the agent's tests.

The tiny random model cannot write SQL, so the tests answer each stage's prompt in that
stage's format from a script: `script(stage, prompt_text, body) -> answer`. The stage is read
from the prompt's `### Task:` line. Tokens are the prompt's UTF-8 bytes (`/tokenize`,
`/detokenize`), so the gateway's token-id prompts decode back to the exact text.
Runs uvicorn in a thread (the gateway's `BackgroundServer`); `ScriptedEngine` is a
context manager (fixtures start and stop it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from flowserve.apps.text2sql.prompts import TASKS
from flowserve.gateway.server import BackgroundServer

Script = Callable[[str, str, dict[str, Any]], str]  # (stage, prompt text, request body) → answer


def stage_of(prompt: str) -> str:
    return next((stage for marker, stage in TASKS.items() if prompt.startswith(marker)), "unknown")


def _decode(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return bytes(int(t) % 256 for t in prompt).decode("utf-8", errors="replace")


def make_app(engine: ScriptedEngine) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": engine.model, "object": "model"}]}

    @app.post("/tokenize")
    async def tokenize(req: Request) -> dict[str, Any]:
        body = await req.json()
        return {"tokens": list(str(body.get("prompt", body.get("content", ""))).encode())}

    @app.post("/detokenize")
    async def detokenize(req: Request) -> dict[str, Any]:
        return {"prompt": _decode((await req.json())["tokens"])}

    @app.post("/v1/completions")
    async def completions(req: Request) -> Any:
        body = await req.json()
        text = _decode(body["prompt"])
        stage = stage_of(text)
        engine.seen.append((stage, text))
        if engine.delay_s:
            await asyncio.sleep(engine.delay_s)
        try:
            answer = engine.script(stage, text, body)
        except Exception as e:  # the script's own bug: an engine error, visible in the test
            return JSONResponse({"error": {"message": f"script: {e}", "type": "server_error"}}, status_code=500)
        out = answer.encode()[: int(body.get("max_tokens", 16))].decode("utf-8", errors="ignore")
        usage = {"prompt_tokens": len(text.encode()), "completion_tokens": len(out.encode()),
                 "total_tokens": len(text.encode()) + len(out.encode())}
        if not body.get("stream"):
            return {"id": "cmpl-1", "object": "text_completion", "model": engine.model,
                    "choices": [{"index": 0, "text": out, "finish_reason": "stop"}], "usage": usage}

        async def events() -> Any:
            for piece in (out[: len(out) // 2], out[len(out) // 2:]):
                chunk = {"id": "cmpl-1", "object": "text_completion", "model": engine.model,
                         "choices": [{"index": 0, "text": piece, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            last = {"id": "cmpl-1", "object": "text_completion", "model": engine.model,
                    "choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "usage": usage}
            yield f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


class ScriptedEngine:
    def __init__(self, script: Script, model: str = "scripted", delay_s: float = 0.0) -> None:
        self.script = script
        self.model = model
        self.delay_s = delay_s
        self.seen: list[tuple[str, str]] = []
        self._server = BackgroundServer(make_app(self))
        self.url = self._server.url

    def __enter__(self) -> ScriptedEngine:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def stages(self) -> list[str]:
        return [s for s, _ in self.seen]
