"""A scripted OpenAI-compatible engine that calls tools, over HTTP on 127.0.0.1.

It renders chats as vLLM does, with a chat template (the tiny model's), and tokenizes text
as its UTF-8 bytes: `/tokenize` takes a `prompt` or `messages` (+ `tools`). Its answers:

* `/v1/chat/completions` with tools offered and no tool result yet: a call of the first
  tool (`get_weather`, arguments `{"city": "Paris"}`), streamed as tool-call deltas (name
  first, then the arguments in two pieces) or whole, `finish_reason: "tool_calls"`;
* after a tool result: a text answer quoting it; `logprobs` when asked;
* `/v1/completions` (token ids): a fixed text.

Usage reports `cached_tokens`: the prefix shared with the previous prompt. Every request
body is kept in `requests` (path, body) for the tests to read. `ToolEngine` is a context
manager (fixtures start and stop it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from flowserve.engines.tinymodel import CHAT_TEMPLATE
from flowserve.gateway.server import BackgroundServer
from flowserve.tokenize.template import ChatTemplate

ARGUMENTS = '{"city": "Paris"}'
PLAIN = "a plain answer"
# what the engine says about itself in every answer (relayed by the gateway as it is)
OWN = {"created": 1_700_000_000, "system_fingerprint": "fp-tool-engine"}


class ToolEngine:
    def __init__(self, model: str = "llama-3.1-8b") -> None:
        self.model = model
        self.template = ChatTemplate({"default": CHAT_TEMPLATE})
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._last: bytes = b""
        self._server = BackgroundServer(self._app())
        self.url = self._server.url

    def __enter__(self) -> ToolEngine:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bytes:
        return self.template.render(messages, tools).encode()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [b for p, b in self.requests if p == path]

    def _usage(self, prompt: bytes, completion: int) -> dict[str, Any]:
        shared = next((i for i, (a, b) in enumerate(zip(prompt, self._last, strict=False)) if a != b),
                      min(len(prompt), len(self._last)))
        self._last = prompt
        return {"prompt_tokens": len(prompt), "completion_tokens": completion,
                "total_tokens": len(prompt) + completion, "prompt_tokens_details": {"cached_tokens": shared}}

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        async def health() -> dict[str, str]:
            return {"status": "ok"}

        @app.post("/tokenize")
        async def tokenize(req: Request) -> dict[str, Any]:
            body = await req.json()
            self.requests.append(("/tokenize", body))
            if "messages" in body:
                return {"tokens": list(self.render(body["messages"], body.get("tools")))}
            return {"tokens": list(str(body["prompt"]).encode())}

        @app.post("/v1/completions")
        async def completions(req: Request) -> Any:
            body = await req.json()
            self.requests.append(("/v1/completions", body))
            use = self._usage(bytes(body["prompt"]), 3)
            logprobs = {"tokens": ["a"], "token_logprobs": [-0.25], "top_logprobs": None, "text_offset": [0]}
            if body.get("stream"):
                return StreamingResponse(self._text_events(use), media_type="text/event-stream")
            return {"id": "cmpl-t", "object": "text_completion", "model": self.model, "usage": use, **OWN,
                    "choices": [{"index": 0, "text": PLAIN, "finish_reason": "stop",
                                 "logprobs": logprobs if body.get("logprobs") is not None else None}]}

        @app.post("/v1/chat/completions")
        async def chat(req: Request) -> Any:
            body = await req.json()
            self.requests.append(("/v1/chat/completions", body))
            messages, tools = body["messages"], body.get("tools")
            use = self._usage(self.render(messages, tools), 7)
            calling = bool(tools) and messages[-1]["role"] != "tool" and body.get("tool_choice") != "none"
            text = None if calling else f"it is {messages[-1]['content']}"
            logprobs = ({"content": [{"token": "it", "logprob": -0.5, "bytes": [105, 116], "top_logprobs": []}]}
                        if body.get("logprobs") else None)
            if not body.get("stream"):
                message: dict[str, Any] = {"role": "assistant", "content": text}
                if calling:
                    message["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
                        "name": tools[0]["function"]["name"], "arguments": ARGUMENTS}}]
                return {"id": "chatcmpl-t", "object": "chat.completion", "model": self.model, "usage": use, **OWN,
                        "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                                     "finish_reason": "tool_calls" if calling else "stop"}]}
            deltas = (tool_call_deltas(tools[0]["function"]["name"]) if calling
                      else [{"content": text[:3]}, {"content": text[3:]}])
            return StreamingResponse(self._events(deltas, use, "tool_calls" if calling else "stop", logprobs),
                                     media_type="text/event-stream")

        return app

    def _events(self, deltas: list[dict[str, Any]], use: dict[str, Any], finish: str,
                logprobs: dict[str, Any] | None) -> Iterator[str]:
        def event(choices: list[dict[str, Any]], **more: Any) -> str:
            return "data: " + json.dumps({"id": "chatcmpl-t", "object": "chat.completion.chunk",
                                          "model": self.model, "choices": choices, **OWN, **more}) + "\n\n"
        yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        for d in deltas:
            yield event([{"index": 0, "delta": d, "logprobs": logprobs, "finish_reason": None}])
        yield event([{"index": 0, "delta": {}, "finish_reason": finish}])
        yield event([], usage=use) + "data: [DONE]\n\n"


    def _text_events(self, use: dict[str, Any]) -> Iterator[str]:
        def event(choices: list[dict[str, Any]], **more: Any) -> str:
            return "data: " + json.dumps({"id": "cmpl-t", "object": "text_completion", "model": self.model,
                                          "choices": choices, **OWN, **more}) + "\n\n"
        for piece in (PLAIN[:2], PLAIN[2:]):
            yield event([{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}])
        yield event([{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}])
        yield event([], usage=use) + "data: [DONE]\n\n"


def tool_call_deltas(name: str) -> list[dict[str, Any]]:
    """A tool call as an engine streams it: id and name first, then the arguments in pieces."""
    return [{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                             "function": {"name": name, "arguments": ""}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": ARGUMENTS[:8]}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": ARGUMENTS[8:]}}]}]
