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
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import httpx
import orjson

from flowserve.errors import FlowserveError

EngineKind = Literal["openai", "llamacpp", "vllm", "sglang"]
Prompt = str | Sequence[int]
ChunkHook = Callable[[Mapping[str, Any]], None]


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


class _Accumulator:
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

    def add(self, data: Mapping[str, Any], now: float | None) -> None:
        if "error" in data:
            raise _error_from_body(data, None)
        self.model = data.get("model", self.model)
        self.usage = data.get("usage") or self.usage
        self.timings = data.get("timings") or self.timings
        for choice in data.get("choices") or ():
            text = choice.get("text")
            if text is None:
                msg = choice.get("delta") or choice.get("message") or {}
                text = msg.get("content")
            if text is not None:
                if now is not None and self.first_token is None:
                    self.first_token = now
                if text:
                    self.chunks_with_content += 1
                self.parts.append(text)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

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
            finish_reason=self.finish_reason, model=self.model, timings=self.timings)


def _error_from_body(body: Any, status: int | None) -> EngineError:
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
                              retryable=True) from None
        except httpx.TimeoutException as e:
            raise EngineError(f"{self.base_url}{path}: timed out ({type(e).__name__})", retryable=True) from None
        except (httpx.TransportError, aiohttp.ClientError) as e:  # refused, reset, closed mid-stream
            raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e or 'connection failed'}",
                              retryable=True) from None

    async def _send(self, path: str, body: Mapping[str, Any], on_chunk: ChunkHook | None) -> CompletionResult:
        if self._fast:
            return await self._send_fast(path, body, on_chunk)
        acc = _Accumulator(time.monotonic())
        if not body.get("stream"):
            resp = await self._http.post(path, json=body)
            data = _json_or_error(resp)
            acc.add(data, None)
            return acc.result(time.monotonic())
        async with self._http.stream("POST", path, json=body) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                _json_or_error(resp)
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
        acc = _Accumulator(time.monotonic())
        async with await self._post_fast(path, orjson.dumps(body)) as resp:
            if resp.status >= 400 or not body.get("stream"):
                acc.add(_json_or_error_raw(resp.status, await resp.read(), f"{self.base_url}{path}"), None)
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

    async def apply_chat_template(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """llama-server's `/apply-template`: the prompt text a chat request would run, so a
        router can tokenize chat requests and send them as token-id completions."""
        data = await self.request_json("POST", "/apply-template", {"messages": [dict(m) for m in messages]})
        return str(data["prompt"])

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
                    return _json_or_error_raw(resp.status, await resp.read(), f"{self.base_url}{path}")
            except (aiohttp.ClientError, TimeoutError) as e:
                raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e or 'failed'}",
                                  retryable=True) from None
        try:
            resp = await self._http.request(method, path, json=body)
        except httpx.TimeoutException as e:
            raise EngineError(f"{self.base_url}{path}: timed out ({type(e).__name__})", retryable=True) from None
        except httpx.TransportError as e:
            raise EngineError(f"{self.base_url}{path}: {type(e).__name__}: {e}", retryable=True) from None
        return _json_or_error(resp)


def _json_or_error_raw(status: int, raw: bytes, url: str) -> Any:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = {"message": raw[:300].decode(errors="replace")}
        if status < 400:
            raise EngineError(f"{url}: response is not JSON: {raw[:100]!r}", retryable=False, status=status) from None
    if status >= 400:
        raise _error_from_body(data, status)
    return data


def _json_or_error(resp: httpx.Response) -> Any:
    return _json_or_error_raw(resp.status_code, resp.content, str(resp.request.url))


__all__ = ["CompletionResult", "EngineClient", "EngineError", "EngineKind", "retryable_status"]
