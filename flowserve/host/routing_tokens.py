"""Tokenization in the gateway: the router must see the token ids the engine will see.

* Synchronously, as the core's `PromptTokenizer`, where no IO is needed: token-id
  parts; segments of replayed workloads (`TokenMaterializer`, or the simulator's markers
  when only simulated engines serve the model); text when the model's tokenizer is local
  (`gateway.tokenizers: {model: tokenizer.json}`, or the word tokenizer of simulated
  engines); chats that carry their ids (an OpenAI chat request: the gateway tokenized
  it once and the ids travel with the request), or when the model's chat template is
  local too (`gateway.chat_templates: {model: tokenizer_config.json}`).
* Otherwise asynchronously, for the core's `Tokenize` commands and the gateway's own
  requests: the up engines' `/tokenize`, and for chats the engines' own rendering
  (llama-server's `/apply-template`, vLLM's `/tokenize` with `messages`; healthy circuits
  first; one engine down does not fail requests).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import orjson

from flowserve.core.records import InstanceStatus
from flowserve.engines.backend import EngineError
from flowserve.graph.plan import Materializer
from flowserve.graph.prompt import Chat, Lit, Out, PartVisitor, Prompt, Segment, Toks
from flowserve.host.intake.offload import LARGE_CHAT_TURNS, LARGE_TEXT_CHARS, off_loop
from flowserve.tokenize.chat import ChatTokenizer, chat_messages, chat_parts
from flowserve.tokenize.prompts import encode_parts
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.tokenize.template import ChatTemplate, TemplateError
from flowserve.tokenize.text import LocalTokenizer
from flowserve.tokenize.words import WordTokenizer
from flowserve.types.commands import Tokenize
from flowserve.types.events import Tokenized
from flowserve.types.work import Tokens


class GatewayTokens:
    def __init__(self, status: Callable[[], list[InstanceStatus]],
                 engine_tokenizer: Callable[[str], ChatTokenizer | None],
                 circuit: Callable[[str], str], local: Mapping[str, str],
                 segments: TokenMaterializer | None = None, templates: Mapping[str, str] | None = None) -> None:
        """status: the core's instances; engine_tokenizer: an instance's engine tokenizer
        (None for simulated engines); local: model → tokenizer.json; segments: how replayed
        segments become real token ids (None: only simulated engines may receive them);
        templates: model → tokenizer_config.json (or .jinja) with its chat template."""
        self._status = status
        self._engine_tokenizer = engine_tokenizer
        self._circuit = circuit
        self._local = {m.lower(): LocalTokenizer(Path(p)) for m, p in local.items()}
        self._templates = {m.lower(): ChatTemplate.from_file(Path(p)) for m, p in (templates or {}).items()}
        self._words = WordTokenizer()
        self._markers = Materializer()
        self.segments = segments
        self._recent = RecentTokenizations()

    # ------------------------------------------------------------------ synchronous

    def _serving(self, model: str | None) -> list[InstanceStatus]:
        return [s for s in self._status() if s.up and (model is None or s.spec.model.lower() == model.lower())]

    def _local_text(self, model: str | None) -> Callable[[str], list[int]] | None:
        serving = self._serving(model)
        if model is None and serving:
            model = serving[0].spec.model
        if model is not None and model.lower() in self._local:
            return self._local[model.lower()].encode_sync
        if serving and all(s.spec.backend == "sim" for s in serving):
            return self._words.encode_sync
        return None

    def _segment_ids(self, model: str | None) -> Callable[[Segment], Tokens] | None:
        if self.segments is not None:
            return self.segments.segment
        serving = self._serving(model)
        if serving and all(s.spec.backend == "sim" for s in serving):
            return self._markers.segment
        return None

    def encode(self, prompt: Prompt, model: str | None) -> Tokens | None:
        """The core's `PromptTokenizer`: None when only an engine can tokenize the prompt."""
        return encode_parts(prompt, _LocalIds(self, model))

    def _chat_sync(self, chat: Chat, model: str | None) -> Tokens | None:
        """A chat's ids without IO: those it carries (the gateway's own requests), rendered
        by the local template and tokenizer, or the neutral layout of simulated engines."""
        if chat.ids is not None:
            return chat.ids
        serving = self._serving(model)
        if serving and all(s.spec.backend == "sim" for s in serving):
            return self.encode(chat_parts(chat), model)
        template, text = self._template(model), self._local_text(model)
        if template is None or text is None:
            return None
        try:
            return tuple(text(self._render(template, chat)))
        except EngineError:
            return None  # the driver's `Tokenized` carries the reason

    def _template(self, model: str | None) -> ChatTemplate | None:
        return self._templates.get(model.lower()) if model is not None else None

    @staticmethod
    def _render(template: ChatTemplate, chat: Chat) -> str:
        try:
            return template.render(chat_messages(chat), chat.tools)
        except (TemplateError, ValueError) as e:
            raise EngineError(str(e), retryable=False) from None

    # ------------------------------------------------------------------ through the engines

    def tokenizers(self, model: str | None) -> list[ChatTokenizer]:
        """Who can tokenize for `model`: the engines of the up instances whose circuit is
        closed (one that never answered is down), else the word tokenizer of simulated
        engines."""
        found = [tok for s in self._serving(model) if self._circuit(s.name) == "closed"
                 and (tok := self._engine_tokenizer(s.name)) is not None]
        return found or [self._words]

    async def _ask(self, model: str | None, fn: Callable[[ChatTokenizer], Any]) -> Any:
        """The first tokenizer that answers: one engine failing (down, or answering
        errors) must not fail requests another engine can tokenize."""
        errors: list[EngineError] = []
        for tok in self.tokenizers(model):
            try:
                return await fn(tok)
            except EngineError as e:
                errors.append(e)
        raise errors[0]

    async def text(self, text: str, model: str | None) -> list[int]:
        local = self._local_text(model)
        if local is not None:
            return await off_loop(len(text) > LARGE_TEXT_CHARS, local, text)
        return await self._recent.get((model, text), lambda: self._ask(model, lambda tok: tok.encode(text)))

    async def chat(self, chat: Chat, model: str | None) -> list[int]:
        """A chat's token ids as the engine will run them (raises EngineError): the
        model's local template, else the engines' own rendering; recent ones are kept.
        A long chat is laid out or rendered in a worker thread, as long texts are tokenized."""
        large = len(chat.turns) > LARGE_CHAT_TURNS
        key = await off_loop(large, chat_key, chat, model)
        serving = self._serving(model)
        if serving and all(s.spec.backend == "sim" for s in serving):
            async def laid_out() -> list[int]:
                return list(await self.prompt(await off_loop(large, chat_parts, chat), model))
            return await self._recent.get(key, laid_out)
        template = self._template(model)
        if template is not None:
            async def rendered() -> list[int]:
                return await self.text(await off_loop(large, self._render, template, chat), model)
            return await self._recent.get(key, rendered)

        async def ask() -> list[int]:
            try:
                chat_messages(chat)  # text only: a clear error before any engine is asked
            except ValueError as e:
                raise EngineError(str(e), retryable=False) from None
            return await self._ask(model, lambda tok: tok.encode_chat(chat))
        return await self._recent.get(key, ask)

    async def prompt(self, prompt: Prompt, model: str | None) -> Tokens:
        """Any prompt, asking the engines where needed (raises EngineError)."""
        ids = _EngineIds(self, model)
        out: list[int] = []
        for p in prompt:
            out.extend(await p.accept(ids))
        return tuple(out)

    async def tokenized(self, cmd: Tokenize, clock: Callable[[], float]) -> Tokenized:
        """The answer to the core's `Tokenize` (an engine that cannot tokenize: the error)."""
        try:
            return Tokenized(clock(), cmd.call_id, await self.prompt(cmd.prompt, cmd.model))
        except EngineError as e:
            return Tokenized(clock(), cmd.call_id, error=str(e), kind=e.kind)


class _LocalIds(PartVisitor[Tokens | None]):
    """A part's ids without IO (`GatewayTokens.encode`), or None."""

    def __init__(self, tokens: GatewayTokens, model: str | None) -> None:
        self._tokens, self._model = tokens, model
        self._text: Callable[[str], list[int]] | None = None  # looked up once per prompt
        self._seg: Callable[[Segment], Tokens] | None = None

    def lit(self, p: Lit) -> Tokens | None:
        self._text = self._text or self._tokens._local_text(self._model)
        return None if self._text is None else tuple(self._text(p.text))

    def segment(self, p: Segment) -> Tokens | None:
        self._seg = self._seg or self._tokens._segment_ids(self._model)
        return None if self._seg is None else self._seg(p)

    def out(self, p: Out) -> None:
        return None  # resolved before tokenization

    def toks(self, p: Toks) -> Tokens:
        return p.ids

    def chat(self, p: Chat) -> Tokens | None:
        return self._tokens._chat_sync(p, self._model)


class _EngineIds(PartVisitor[Awaitable[Tokens]]):
    """A part's ids, asking the engines where needed (`GatewayTokens.prompt`)."""

    def __init__(self, tokens: GatewayTokens, model: str | None) -> None:
        self._tokens, self._model = tokens, model

    async def lit(self, p: Lit) -> Tokens:
        return tuple(await self._tokens.text(p.text, self._model))

    async def segment(self, p: Segment) -> Tokens:
        seg = self._tokens._segment_ids(self._model)
        if seg is None:
            raise EngineError("a modelled prompt segment reached a real engine without a replay "
                              "vocabulary (TokenMaterializer)", retryable=False)
        return seg(p)

    async def out(self, p: Out) -> Tokens:
        raise EngineError(f"the prompt reads step {p.step!r}, which was not resolved", retryable=False)

    async def toks(self, p: Toks) -> Tokens:
        return p.ids

    async def chat(self, p: Chat) -> Tokens:
        return p.ids if p.ids is not None else tuple(await self._tokens.chat(p, self._model))


def chat_key(chat: Chat, model: str | None) -> Hashable:
    """What identifies a chat's rendering: the model, and a digest of the turns and tools
    (a tuple of the turns was hashed again on every lookup: seconds for 50,000 turns)."""
    return model, "chat", hashlib.blake2b(orjson.dumps(chat, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class RecentTokenizations:
    """The engines' answers for recent texts (LRU), and one request in flight per text:
    repeated prompts (system prompts, retries, agent loops) skip the `/tokenize` round
    trip, and concurrent identical ones share it. A failure is not cached."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._done: OrderedDict[Hashable, list[int]] = OrderedDict()
        self._pending: dict[Hashable, asyncio.Future[list[int]]] = {}

    async def get(self, key: Hashable, ask: Callable[[], Awaitable[list[int]]]) -> list[int]:
        ids = self._done.get(key)
        if ids is not None:
            self._done.move_to_end(key)
            return list(ids)
        pending = self._pending.get(key)
        if pending is not None:
            return list(await asyncio.shield(pending))
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        try:
            ids = await ask()
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: waiters get it, nobody else must
            raise
        finally:
            del self._pending[key]
        fut.set_result(ids)
        self._done[key] = ids
        if len(self._done) > self.size:
            self._done.popitem(last=False)
        return list(ids)
