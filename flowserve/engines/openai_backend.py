"""`backend: openai`: a real OpenAI-compatible engine (llama-server, vLLM, SGLang) through
the engines' `EngineClient` (one connection pool per instance).

Every call goes to `/v1/completions` with the call's **token ids** as the prompt — also
chat requests, whose messages the gateway rendered with the engine's own chat template
(llama-server's `/apply-template`) and tokenized with the engine's `/tokenize` — so the
router's prefix index holds exactly the tokens the engine caches. The request streams,
so the driver learns the first-token time, and relays text deltas to a streaming client.
The engine kind (llama.cpp's server or another OpenAI-compatible one) is detected once
from `/props` unless configured (`gateway.engine_kinds`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flowserve.engines.backend import CallOutcome, EngineRequest
from flowserve.engines.client import EngineClient, EngineError, EngineKind
from flowserve.gateway.settings import GatewaySettings
from flowserve.tokenize.chat import render_chat_plain
from flowserve.tokenize.text import make_tokenizer
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall


class EngineTokens:
    """The router's tokenizer for this instance's model (see `flowserve.tokenize`)."""

    def __init__(self, backend: OpenAIBackend, tokenizer_json: str | None) -> None:
        self._backend = backend
        self._json = Path(tokenizer_json) if tokenizer_json else None
        self._tok: Any = None

    async def _get(self) -> Any:
        if self._tok is None:
            client = await self._backend.client()
            self._tok = make_tokenizer(client, self._json)
        return self._tok

    async def encode(self, text: str) -> list[int]:
        return await (await self._get()).encode(text)

    async def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        client = await self._backend.client()
        if client.engine == "llamacpp":
            return await client.apply_chat_template(messages)
        return render_chat_plain(messages)


class OpenAIBackend:
    def __init__(self, spec: InstanceSpec, settings: GatewaySettings) -> None:
        assert spec.url, f"instance {spec.name} has no url"
        self.spec = spec
        self._settings = settings
        self._kind: EngineKind | None = settings.engine_kinds.get(spec.name)  # type: ignore[assignment]
        self._client: EngineClient | None = None
        self._lock = asyncio.Lock()
        self.tokenizer = EngineTokens(self, settings.tokenizers.get(spec.model))

    async def client(self) -> EngineClient:
        if self._client is None:
            async with self._lock:
                if self._client is None:
                    kind = self._kind or await detect_engine(self.spec.url or "", self._settings)
                    s = self._settings
                    self._client = EngineClient(self.spec.url or "", engine=kind, timeout=s.request_timeout_s,
                                                connect_timeout=s.connect_timeout_s,
                                                read_timeout=s.request_timeout_s)
        return self._client

    def begin(self, call: LLMCall, req: EngineRequest) -> asyncio.Future[CallOutcome]:
        return asyncio.ensure_future(self._run(call, req))

    async def _run(self, call: LLMCall, req: EngineRequest) -> CallOutcome:
        client = await self.client()
        params = dict(call.params)
        temperature = float(params.pop("temperature", 0.0))
        sink = req.sink
        relay = None
        if sink is not None:
            def relay(chunk: Mapping[str, Any]) -> None:
                for choice in chunk.get("choices") or ():
                    sink.push(choice.get("text") or "")
        # only a streaming client needs the engine's stream: a whole answer is one JSON body
        # to parse instead of a chunk per token (the TTFT metric then covers streams only).
        # llama-server streams anyway: it notices a closed connection (a cancelled call)
        # only while streaming — a non-streamed request is checked only after a second
        # with no result for any request, which a busy server never has
        stream = sink is not None or client.engine == "llamacpp"
        res = await client.complete(list(call.prompt), req.max_tokens, stream=stream,
                                    temperature=temperature,
                                    ignore_eos=req.ignore_eos, extra=params, on_chunk=relay)
        return CallOutcome(output_tokens=res.output_tokens, cached_tokens=res.cached_tokens or 0,
                           prompt_tokens=res.prompt_tokens or call.input_tokens, text=res.text,
                           finish_reason=res.finish_reason or "length", started=res.started,
                           first_token=res.first_token)

    async def probe(self) -> bool:
        if self._client is None:
            try:
                await self.client()
            except EngineError:
                return False
        assert self._client is not None
        return await self._client.health()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


async def detect_engine(url: str, settings: GatewaySettings) -> EngineKind:
    """llama.cpp's server answers `/props` with its generation settings; others do not."""
    async with EngineClient(url, connect_timeout=settings.connect_timeout_s, timeout=10.0) as probe:
        try:
            props = await probe.props()
        except EngineError as e:
            if e.status is None:  # unreachable: let the first call fail (and retry) instead
                raise
            return "openai"
    return "llamacpp" if isinstance(props, Mapping) and "default_generation_settings" in props else "openai"
