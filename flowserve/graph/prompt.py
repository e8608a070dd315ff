"""Prompts of the workflow IR: sequences of parts that either driver can turn into tokens.

A workflow builds each LLM prompt from parts, so the same workflow code runs on real
text in the gateway and on modelled token lengths in the simulator:

* `Lit(text)` — literal text (instructions, a question, a schema);
* `Segment(id, length)` — a modelled run of `length` distinct tokens (simulated or
  replayed prompts; equal ids are equal tokens, so sharing structure is explicit);
* `Out(step)` — the output of another step of the same query; the runtime replaces it
  with that step's result once the step finished (its text live, a segment of its
  output length in the simulator). A step that reads a *missing* output (a part beyond
  those its source produced) through a plain `Out` is skipped, and so is every step
  that reads it in turn; an `Out(step, optional=True)` (`step.optional`) reads a missing
  output as nothing, so a join runs on the parts that exist;
* `Toks(ids)` — token ids already known (an OpenAI request's tokenized prompt);
* `Chat(turns, tools)` — chat messages (each turn's content is parts again) and tool
  schemas, which the model's chat template renders; a chat is a prompt's only part.

Drivers tokenize the resolved parts: the gateway with the model's tokenizer, the
simulator with a deterministic word hash and segment markers (`flowserve.tokenize.prompts`).
Whatever consumes parts one by one — the token estimate below, the simulator's and the
gateway's tokenizers — is a `PartVisitor`: one method per kind of part, called by the
part itself (`part.accept(visitor)`), never a switch on the part's type.
"""

from __future__ import annotations

import json
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from flowserve.types.tokens import Tokens

MAX_SEGMENT = 1 << 18  # tokens in one segment
OUTPUT_SEGMENT_BASE = 1 << 52  # ids of modelled outputs, above any workload's segment ids


R = TypeVar("R")


class PartVisitor(ABC, Generic[R]):
    """What to make of each kind of prompt part (see the module docstring)."""

    @abstractmethod
    def lit(self, p: Lit) -> R: ...

    @abstractmethod
    def segment(self, p: Segment) -> R: ...

    @abstractmethod
    def out(self, p: Out) -> R: ...

    @abstractmethod
    def toks(self, p: Toks) -> R: ...

    @abstractmethod
    def chat(self, p: Chat) -> R: ...


@dataclass(frozen=True, slots=True)
class Lit:
    text: str

    def accept(self, v: PartVisitor[R]) -> R:
        return v.lit(self)


@dataclass(frozen=True, slots=True)
class Segment:
    id: int
    length: int

    def __post_init__(self) -> None:
        assert 0 < self.length <= MAX_SEGMENT, self.length

    def accept(self, v: PartVisitor[R]) -> R:
        return v.segment(self)


@dataclass(frozen=True, slots=True)
class Out:
    step: str
    optional: bool = False  # a missing output reads as nothing instead of skipping the reader

    def accept(self, v: PartVisitor[R]) -> R:
        return v.out(self)


@dataclass(frozen=True, slots=True)
class Toks:
    ids: Tokens

    def accept(self, v: PartVisitor[R]) -> R:
        return v.toks(self)


@dataclass(frozen=True, slots=True)
class Turn:
    """One chat message: its role, its content as parts (None: an assistant turn that
    only calls tools), and its other OpenAI fields as plain JSON (tool_calls,
    tool_call_id, name)."""

    role: str
    content: Prompt | None
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chat:
    """Chat messages and the tools offered (OpenAI function-tool schemas, plain JSON).
    Drivers render it with the model's chat template; the simulator with a neutral one.
    `ids`: the token ids it renders to for the model its request names, when the gateway
    rendered and tokenized it already (an OpenAI chat request): they travel with it into
    the core, which routes by them without asking again."""

    turns: tuple[Turn, ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    ids: Tokens | None = None

    def accept(self, v: PartVisitor[R]) -> R:
        return v.chat(self)


class Readable:
    """What a prompt may name to read its output: a step handle (`flowserve.graph.workflow.Step`).
    (A plain base class, not an ABC: `as_prompt` checks every item against it, and an ABC's
    isinstance is a Python-level check.)"""

    @property
    def out(self) -> Out:
        raise NotImplementedError


Part = Lit | Segment | Out | Toks | Chat
Prompt = tuple[Part, ...]


_PART_TYPES = (Lit, Segment, Out, Toks, Chat)


def as_prompt(*items: Any) -> Prompt:
    """Parts from strings, parts, prompts, step handles (their output) and lists of these."""
    if len(items) == 1 and type(items[0]) is tuple and all(type(p) in _PART_TYPES for p in items[0]):
        return items[0]  # already a prompt (replayed plans, tokenized requests): the common case
    out: list[Part] = []
    for item in items:
        if isinstance(item, str):
            if item:
                out.append(Lit(item))
        elif isinstance(item, _PART_TYPES):
            out.append(item)
        elif isinstance(item, Readable):  # a step handle
            out.append(item.out)
        elif isinstance(item, Iterable):
            out.extend(as_prompt(*item))
        else:
            raise TypeError(f"cannot use {type(item).__name__} as a prompt part")
    return tuple(out)


def as_chat(messages: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] = ()) -> Chat:
    """A chat from OpenAI-style messages whose `content` may be text, parts or step
    handles (None: no content); every other message field is kept as is."""
    turns = []
    for m in messages:
        fields = dict(m)
        role, content = fields.pop("role", None), fields.pop("content", None)
        if not isinstance(role, str) or not role:
            raise TypeError(f"a chat message needs a role (a non-empty string), got {role!r}")
        parts = None if content is None else as_prompt(content)
        if parts is not None and any(isinstance(q, Chat) for q in parts):
            raise TypeError("a chat message's content cannot hold another chat")
        turns.append(Turn(role, parts, fields))
    return Chat(tuple(turns), tuple(dict(t) for t in tools))


def resolve(parts: Prompt, output: Callable[[str], Prompt]) -> Prompt:
    """The prompt with each `Out(step)` replaced by `output(step)`, inside chat turns too."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, Out):
            out.extend(output(p.step))
        elif isinstance(p, Chat):
            turns = tuple(t if t.content is None else Turn(t.role, resolve(t.content, output), t.fields)
                          for t in p.turns)
            out.append(Chat(turns, p.tools, p.ids))  # ids come only with resolved chats (requests)
        else:
            out.append(p)
    return tuple(out)


def refs(parts: Prompt) -> tuple[str, ...]:
    """The steps whose outputs the prompt reads (also inside chat turns)."""
    out: list[str] = []
    for p in parts:
        if isinstance(p, Out):
            out.append(p.step)
        elif isinstance(p, Chat):
            out.extend(refs(tuple(q for t in p.turns for q in t.content or ())))
    return tuple(out)


def required(parts: Prompt) -> tuple[str, ...]:
    """The steps whose outputs the prompt cannot do without (plain `Out`s, also inside chat turns)."""
    out: list[str] = []
    for p in parts:
        if isinstance(p, Out) and not p.optional:
            out.append(p.step)
        elif isinstance(p, Chat):
            out.extend(required(tuple(q for t in p.turns for q in t.content or ())))
    return tuple(out)


class TokenEstimate(PartVisitor[int]):
    """Tokens of a part before tokenization: exact for segments and ids (and a chat whose
    ids are known), ~4 characters a token for text, 4 per chat turn for its framing."""

    def lit(self, p: Lit) -> int:
        return len(p.text) // 4 + 1

    def segment(self, p: Segment) -> int:
        return p.length

    def out(self, p: Out) -> int:
        return 0  # not produced yet

    def toks(self, p: Toks) -> int:
        return len(p.ids)

    def chat(self, p: Chat) -> int:
        if p.ids is not None:
            return len(p.ids)
        return sum(estimate_tokens(t.content or ()) + 4 for t in p.turns) + len(json.dumps(p.tools)) // 4


_ESTIMATE = TokenEstimate()


def estimate_tokens(parts: Prompt) -> int:
    """Tokens of a prompt before tokenization (`TokenEstimate`: what deadline budgets need
    before a driver tokenized it)."""
    n = 0
    for p in parts:
        n += p.accept(_ESTIMATE)
    return n


def output_segment_id(query_id: int, step: str) -> int:
    """The segment id of a step's modelled output: distinct per (query, step), stable
    across runs (crc32, not Python's salted hash)."""
    return OUTPUT_SEGMENT_BASE + (query_id << 24) + (zlib.crc32(step.encode()) & 0xFFFFFF)


def value_parts(value: Any) -> Prompt:
    """A tool's result as prompt text: parts as they are, strings verbatim, lists of
    strings one per paragraph, anything else as JSON."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (Lit(value),) if value else ()
    if isinstance(value, tuple) and all(isinstance(v, Lit | Segment | Toks) for v in value):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return (Lit("\n\n".join(value)),) if value else ()
    return (Lit(json.dumps(value, default=str, ensure_ascii=False)),)
