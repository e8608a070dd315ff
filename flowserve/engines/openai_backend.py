"""`backend: openai`: a real OpenAI-compatible engine (llama-server, vLLM, SGLang) through
the engines' `EngineClient` (one connection pool per instance).

A call goes to `/v1/completions` with its **token ids** as the prompt — also a plain
chat, whose messages the gateway rendered as the engine does (the model's template:
llama-server's `/apply-template`, vLLM's `/tokenize` with messages, or the template
rendered locally) — so the router's prefix index holds exactly the tokens the engine
caches. A chat the engine must see as a chat (`sends_chat`: tools offered, tool calls
or results in its turns, a response format, tool choice, logprobs) goes to
`/v1/chat/completions` with every field intact, so the engine applies its template,
grammar and tool-call parser; the router routed it by the same rendering. The request
streams when the client streams, so the driver learns the first-token time and relays
deltas (text, or whole choices with tool-call deltas and logprobs). The engine kind
(llama.cpp's server or another OpenAI-compatible one) is detected once from `/props`
unless configured (`gateway.engine_kinds`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flowserve.engines.answer import own_fields
from flowserve.engines.backend import CallOutcome, EngineRequest, TokenSink
from flowserve.engines.client import EngineClient, EngineError, EngineKind
from flowserve.graph.prompt import Chat
from flowserve.host.settings import GatewaySettings
from flowserve.tokenize.chat import chat_messages
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

    async def encode_chat(self, chat: Chat) -> list[int]:
        client = await self._backend.client()
        messages = chat_messages(chat)
        if client.engine == "llamacpp":
            return await self.encode(await client.apply_chat_template(messages, chat.tools))
        try:
            return await client.tokenize_chat(messages, chat.tools)
        except EngineError as e:
            if e.retryable:
                raise
            raise EngineError(f"{e} — this engine does not render chats through /tokenize; set "
                              f"gateway.chat_templates for model {self._backend.spec.model!r}",
                              retryable=False, status=e.status) from None


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
            told = False

            def relay(chunk: Mapping[str, Any]) -> None:
                nonlocal told
                if not told and (own := own_fields(chunk)):  # the stream's id, before its first delta
                    told = True
                    sink.own(own)
                for choice in chunk.get("choices") or ():
                    relay_choice(choice, sink)
        # only a streaming client needs the engine's stream: a whole answer is one JSON body
        # to parse instead of a chunk per token (the TTFT metric then covers streams only).
        # llama-server streams anyway: it notices a closed connection (a cancelled call)
        # only while streaming — a non-streamed request is checked only after a second
        # with no result for any request, which a busy server never has
        stream = sink is not None or client.engine == "llamacpp"
        if call.chat is not None and sends_chat(call.chat, params):
            if call.chat.tools:
                params["tools"] = [dict(t) for t in call.chat.tools]
            res = await client.chat(chat_messages(call.chat), req.max_tokens, stream=stream,
                                    temperature=temperature, ignore_eos=req.ignore_eos, extra=params,
                                    on_chunk=relay)
        else:
            if client.engine == "llamacpp" and "response_format" in params:
                schema = llamacpp_schema(params.pop("response_format"))
                if schema is not None:
                    params["json_schema"] = schema
            res = await client.complete(list(call.prompt), req.max_tokens, stream=stream, temperature=temperature,
                                        ignore_eos=req.ignore_eos, extra=params, on_chunk=relay)
        return CallOutcome(output_tokens=res.output_tokens, cached_tokens=res.cached_tokens or 0,
                           prompt_tokens=res.prompt_tokens or call.input_tokens, text=res.text,
                           finish_reason=res.finish_reason or "length", started=res.started,
                           first_token=res.first_token, extra=res.extra, own=res.own)

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


# request fields only a chat request carries (or whose answer has a chat's shape)
CHAT_FIELDS = ("response_format", "tool_choice", "parallel_tool_calls", "logprobs", "top_logprobs")


def sends_chat(chat: Chat, params: Mapping[str, Any]) -> bool:
    """Whether the engine must see this chat as a chat: tools offered, tool calls or tool
    results in its turns, or a field only a chat request carries."""
    return (bool(chat.tools) or any(k in params for k in CHAT_FIELDS)
            or any(t.role == "tool" or t.fields.get("tool_calls") for t in chat.turns))


def llamacpp_schema(response_format: Mapping[str, Any]) -> dict[str, Any] | None:
    """An OpenAI response format as llama-server's completion field `json_schema` (its
    `/v1/completions` reads no `response_format`); None: plain text."""
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        return dict(response_format.get("json_schema", {}).get("schema") or {})
    return None


def relay_choice(choice: Mapping[str, Any], sink: TokenSink) -> None:
    """One streamed choice to the client: its text alone when that is all it says (the
    fast path), else the whole choice (tool-call deltas, logprobs) unchanged. A chat's
    role-only opening chunk has no text: the gateway's stream opens with its own, alike."""
    delta = choice.get("delta")
    if isinstance(delta, Mapping):  # a chat chunk
        text = delta.get("content")
        beyond = choice.get("logprobs") is not None or any(
            v is not None for k, v in delta.items() if k not in ("role", "content"))
    else:  # a completion chunk
        text = choice.get("text")
        beyond = any(v is not None for k, v in choice.items() if k not in ("index", "text", "finish_reason"))
    if beyond:
        sink.push_choice({k: v for k, v in choice.items() if k not in ("index", "finish_reason")})
    elif text:
        sink.push(text)


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
