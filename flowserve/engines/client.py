"""Async client for one OpenAI-compatible engine (vLLM, SGLang, llama.cpp's llama-server).

    client = EngineClient("http://127.0.0.1:8080", model="tiny-llama", engine="llamacpp")
    result = await client.complete([1, 2, 3], max_tokens=16)       # token-id prompt
    result.cached_tokens, result.first_token - result.started     # engine cache hit, TTFT
    await client.aclose()

One `httpx.AsyncClient` (one connection pool) per instance. Requests stream by default
(SSE) so the client sees the first token; `started`, `first_token`, `finished` are this
process's `time.monotonic()` (clients do IO, so they may read the clock; the core never
does). Usage comes from the engine's `usage` (requested in streams with
`stream_options.include_usage`): output and prompt tokens, and cached prompt tokens from
`usage.prompt_tokens_details.cached_tokens`, else llama-server's `timings.cache_n`;
`None` when the engine reports neither. Without usage, output tokens = content chunks.

`engine="llamacpp"` adds `cache_prompt: true` (llama-server then reuses the slot's KV
prefix) and uses its `/tokenize` body. Prompts may be text or a list of token ids; all
three engines accept ids for `/v1/completions`, and the live router sends ids so that
what it indexes is exactly what the engine caches.

Tokenization (`flowserve.tokenize.text.make_tokenizer`): with a `tokenizer.json` configured for the model, the
`tokenizers` library tokenizes locally (no round trip, works while the engine is busy or
down; exact when the file is the served model's tokenizer). Otherwise the engine's own
`/tokenize` is used (always exact for that engine, one extra request per prompt).

Errors raise `EngineError` with `retryable`: connection refused/reset, timeouts, 5xx,
408 and 429 are retryable (another instance or a later attempt may succeed); other 4xx
(bad request, prompt too long, unknown model) are not. Cancelling the awaiting task
closes the stream's connection, which stops generation on the engine. `timeout` bounds
a whole request; `read_timeout` the gap between two bytes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import aiohttp
import httpx
import orjson

from flowserve.engines.answer import (
    Accumulator,
    CompletionResult,
    EngineError,
    json_or_error,
    json_or_error_raw,
    retryable_status,
)
from flowserve.errors import FailureKind

EngineKind = Literal["openai", "llamacpp", "vllm", "sglang"]
Prompt = str | Sequence[int]
ChunkHook = Callable[[Mapping[str, Any]], None]


class EngineClient:
    def __init__(self, base_url: str, *, model: str | None = None, engine: EngineKind = "openai",
                 api_key: str | None = None, timeout: float | None = 600.0, connect_timeout: float = 5.0,
                 read_timeout: float = 120.0, max_connections: int = 64,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.engine = engine
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # the hot path (generation, /tokenize) runs on aiohttp: pooled keep-alive
        # connections at a fraction of httpx's cost per request; httpx serves the rest and
        # a given `transport` (tests' mocks)
        self._fast = transport is None
        self._aio: aiohttp.ClientSession | None = None
        self._aio_args = (dict(headers), max_connections, connect_timeout, read_timeout)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._aio is not None:
            await self._aio.close()

    def _session(self) -> aiohttp.ClientSession:
        if self._aio is None:
            headers, limit, connect, read = self._aio_args
            self._aio = aiohttp.ClientSession(
                self.base_url, headers={**headers, "content-type": "application/json"},
                connector=aiohttp.TCPConnector(limit=limit, keepalive_timeout=60, ttl_dns_cache=None),
                timeout=aiohttp.ClientTimeout(sock_connect=connect, sock_read=read), auto_decompress=False)
        return self._aio

    async def __aenter__(self) -> EngineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ generation

    async def complete(self, prompt: Prompt, max_tokens: int, *, stream: bool = True, temperature: float = 0.0,
                       cache_prompt: bool | None = None, ignore_eos: bool = False,
                       extra: Mapping[str, Any] | None = None, timeout: float | None = None,
                       on_chunk: ChunkHook | None = None) -> CompletionResult:
        """`/v1/completions`; `prompt` is text or token ids."""
        body: dict[str, Any] = {"prompt": prompt if isinstance(prompt, str) else list(prompt)}
        body |= self._common(max_tokens, stream, temperature, cache_prompt, ignore_eos, extra)
        return await self.request("/v1/completions", body, timeout=timeout, on_chunk=on_chunk)

    async def chat(self, messages: Sequence[Mapping[str, Any]], max_tokens: int, *, stream: bool = True,
                   temperature: float = 0.0, cache_prompt: bool | None = None, ignore_eos: bool = False,
                   extra: Mapping[str, Any] | None = None, timeout: float | None = None,
                   on_chunk: ChunkHook | None = None) -> CompletionResult:
        """`/v1/chat/completions`."""
        body: dict[str, Any] = {"messages": [dict(m) for m in messages]}
        body |= self._common(max_tokens, stream, temperature, cache_prompt, ignore_eos, extra)
        return await self.request("/v1/chat/completions", body, timeout=timeout, on_chunk=on_chunk)

    def _common(self, max_tokens: int, stream: bool, temperature: float, cache_prompt: bool | None,
                ignore_eos: bool, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "stream": stream}
        if self.model:
            body["model"] = self.model
        if stream:
            body["stream_options"] = {"include_usage": True}
        if cache_prompt is None:
            cache_prompt = self.engine == "llamacpp"
        if cache_prompt or self.engine == "llamacpp":
            body["cache_prompt"] = cache_prompt
        if ignore_eos:
            body["ignore_eos"] = True
        return body | dict(extra or {})

    async def request(self, path: str, body: Mapping[str, Any], *, timeout: float | None = None,
                      on_chunk: ChunkHook | None = None) -> CompletionResult:
        """POST an OpenAI-style body as is (streamed if `body["stream"]`); `on_chunk` sees
        every parsed SSE chunk, e.g. to relay it to a gateway client."""
        limit = timeout if timeout is not None else self.timeout
        try:
            async with asyncio.timeout(limit):
                return await self._send(path, body, on_chunk)
        except TimeoutError:
            raise EngineError(f"{self.base_url}{path}: no complete answer within {limit} s",
                              retryable=True, kind=FailureKind.TIMEOUT) from None
        except httpx.TimeoutException as e:
            raise EngineError(f"{self.base_url}{path}: timed out ({type(e).__name__})", retryable=True,
                              kind=FailureKind.TIMEOUT) from None
        except (httpx.TransportError, aiohttp.ClientError) as e:  # refused, reset, closed mid-stream
            raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e or 'connection failed'}",
                              retryable=True) from None

    async def _send(self, path: str, body: Mapping[str, Any], on_chunk: ChunkHook | None) -> CompletionResult:
        if self._fast:
            return await self._send_fast(path, body, on_chunk)
        acc = Accumulator(time.monotonic())
        if not body.get("stream"):
            resp = await self._http.post(path, json=body)
            data = json_or_error(resp)
            acc.add(data, None)
            return acc.result(time.monotonic())
        async with self._http.stream("POST", path, json=body) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                json_or_error(resp)
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, comments, event: lines
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    data = json.loads(payload)
                except json.JSONDecodeError:
                    raise EngineError(f"{self.base_url}{path}: malformed stream chunk {payload[:100]!r}",
                                      retryable=False) from None
                acc.add(data, time.monotonic())
                if on_chunk is not None:
                    on_chunk(data)
        return acc.result(time.monotonic())

    async def _post_fast(self, path: str, data: bytes) -> Any:
        """POST on a pooled connection; a keep-alive connection the engine closed while
        idle (its request never arrived) is replaced once, as browsers do."""
        try:
            return await self._session().post(path, data=data)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            return await self._session().post(path, data=data)

    async def _send_fast(self, path: str, body: Mapping[str, Any], on_chunk: ChunkHook | None) -> CompletionResult:
        acc = Accumulator(time.monotonic())
        async with await self._post_fast(path, orjson.dumps(body)) as resp:
            if resp.status >= 400 or not body.get("stream"):
                acc.add(json_or_error_raw(resp.status, await resp.read(), f"{self.base_url}{path}"), None)
                return acc.result(time.monotonic())
            rest = b""
            async for block in resp.content.iter_any():  # whatever arrived: often many events
                lines = (rest + block).split(b"\n")
                rest = lines.pop()
                now = time.monotonic()
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue  # blank separators, comments, event: lines
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        return acc.result(now)
                    try:
                        data = orjson.loads(payload)
                    except orjson.JSONDecodeError:
                        raise EngineError(f"{self.base_url}{path}: malformed stream chunk {payload[:100]!r}",
                                          retryable=False) from None
                    acc.add(data, now)
                    if on_chunk is not None:
                        on_chunk(data)
        return acc.result(time.monotonic())

    # ------------------------------------------------------------------ other endpoints

    async def tokenize(self, text: str) -> list[int]:
        """The engine's tokenization of `text` (no BOS/special tokens added)."""
        if self.engine == "llamacpp":
            body: dict[str, Any] = {"content": text, "add_special": False}
        else:
            body = {"prompt": text, "add_special_tokens": False, **({"model": self.model} if self.model else {})}
        return [int(t) for t in (await self.request_json("POST", "/tokenize", body))["tokens"]]

    async def detokenize(self, tokens: Sequence[int]) -> str:
        body: dict[str, Any] = {"tokens": list(tokens)}
        if self.engine != "llamacpp" and self.model:
            body["model"] = self.model
        data = await self.request_json("POST", "/detokenize", body)
        return str(data.get("content", data.get("prompt", "")))

    async def apply_chat_template(self, messages: Sequence[Mapping[str, Any]],
                                  tools: Sequence[Mapping[str, Any]] = ()) -> str:
        """llama-server's `/apply-template`: the prompt text a chat request (with these
        tools) would run, so a router can tokenize chat requests as the engine does."""
        body: dict[str, Any] = {"messages": [dict(m) for m in messages]}
        if tools:
            body["tools"] = [dict(t) for t in tools]
        data = await self.request_json("POST", "/apply-template", body)
        return str(data["prompt"])

    async def tokenize_chat(self, messages: Sequence[Mapping[str, Any]],
                            tools: Sequence[Mapping[str, Any]] = ()) -> list[int]:
        """vLLM's `/tokenize` with `messages` (and `tools`): the token ids of a chat as its
        chat completions would run them (the model's template, generation prompt added)."""
        body: dict[str, Any] = {"messages": [dict(m) for m in messages], "add_generation_prompt": True,
                                "add_special_tokens": False, **({"model": self.model} if self.model else {})}
        if tools:
            body["tools"] = [dict(t) for t in tools]
        return [int(t) for t in (await self.request_json("POST", "/tokenize", body))["tokens"]]

    async def models(self) -> list[str]:
        return [m["id"] for m in (await self.request_json("GET", "/v1/models"))["data"]]

    async def props(self) -> Mapping[str, Any]:
        """llama-server's `/props` (context size, slots, chat template)."""
        return await self.request_json("GET", "/props")

    async def slots(self) -> list[Mapping[str, Any]]:
        """llama-server's `/slots` (per slot: n_ctx, is_processing)."""
        return await self.request_json("GET", "/slots")

    async def get_json(self, path: str) -> Any:
        return await self.request_json("GET", path)

    async def health(self) -> bool:
        try:
            return (await self._http.get("/health", timeout=5.0)).status_code == 200
        except httpx.HTTPError:
            return False

    async def request_json(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        if self._fast and method == "POST":
            try:
                async with await self._post_fast(path, orjson.dumps(body)) as resp:
                    return json_or_error_raw(resp.status, await resp.read(), f"{self.base_url}{path}")
            except (aiohttp.ClientError, TimeoutError) as e:
                raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e or 'failed'}",
                                  retryable=True) from None
        try:
            resp = await self._http.request(method, path, json=body)
        except httpx.TimeoutException as e:
            raise EngineError(f"{self.base_url}{path}: timed out ({type(e).__name__})", retryable=True,
                              kind=FailureKind.TIMEOUT) from None
        except httpx.TransportError as e:
            raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e}", retryable=True) from None
        return json_or_error(resp)


__all__ = ["CompletionResult", "EngineClient", "EngineError", "EngineKind", "retryable_status"]
