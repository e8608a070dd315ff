"""Prompts of the workflow IR (text, segments, token ids) → token ids for the scheduler core.

A driver hands the core a `PromptTokenizer` when it can tokenize without IO (the
simulator always can: `SimTokenizer`; the gateway when it has the model's tokenizer
locally). For a prompt the tokenizer declines (returns None), the core asks the driver
with a `Tokenize` command and waits for `Tokenized`.

`SimTokenizer`, the simulator's: text as hashed word pieces (`flowserve.tokenize.words`),
chats in a neutral layout (`flowserve.tokenize.chat.chat_parts`),
segments as `Materializer` markers (a negative id, then filler zeros; see
`flowserve.graph.plan`), which decode back to segments exactly, token ids as they are.
"""

from __future__ import annotations

from typing import Protocol

from flowserve.graph.plan import Materializer
from flowserve.graph.prompt import Chat, Lit, Out, PartVisitor, Prompt, Segment, Toks
from flowserve.tokenize.chat import chat_parts
from flowserve.tokenize.words import word_ids
from flowserve.types.work import Tokens

PartIds = PartVisitor[Tokens | None]  # a part's token ids, or None when only a driver can tokenize it


class PromptTokenizer(Protocol):
    def encode(self, prompt: Prompt, model: str | None) -> Tokens | None:
        """The prompt's token ids, or None when only the driver can tokenize it."""
        ...


def encode_parts(prompt: Prompt, ids: PartIds) -> Tokens | None:
    """The prompt's token ids, part by part; None as soon as a part has none."""
    if len(prompt) == 1:  # the common case: one token list, one chat
        return prompt[0].accept(ids)
    out: list[int] = []
    for p in prompt:
        got = p.accept(ids)
        if got is None:
            return None
        out.extend(got)
    return tuple(out)


def _resolved(p: Out) -> Tokens:
    raise AssertionError(f"the runtime resolves Out parts before tokenization, got {p!r}")


class _NoTextIds(PartVisitor[Tokens | None]):
    def __init__(self) -> None:
        self._mat = Materializer()

    def lit(self, p: Lit) -> None:
        return None

    def segment(self, p: Segment) -> Tokens:
        return self._mat.segment(p)

    def out(self, p: Out) -> Tokens:
        return _resolved(p)

    def toks(self, p: Toks) -> Tokens:
        return p.ids

    def chat(self, p: Chat) -> Tokens | None:
        return p.ids


class NoText:
    """The default: token ids as they are (a chat's when it carries them), segments as the
    simulator's markers (`Materializer`); text needs a driver's tokenizer."""

    def __init__(self) -> None:
        self._ids = _NoTextIds()

    def encode(self, prompt: Prompt, model: str | None) -> Tokens | None:
        return encode_parts(prompt, self._ids)


class _SimIds(PartVisitor[Tokens]):
    def __init__(self) -> None:
        self.mat = Materializer()

    def lit(self, p: Lit) -> Tokens:
        return tuple(word_ids(p.text))

    def segment(self, p: Segment) -> Tokens:
        return self.mat.segment(p)

    def out(self, p: Out) -> Tokens:
        return _resolved(p)

    def toks(self, p: Toks) -> Tokens:
        return p.ids

    def chat(self, p: Chat) -> Tokens:  # no chat template here: the neutral layout
        ids = encode_parts(chat_parts(p), self)
        assert ids is not None
        return ids


class SimTokenizer:
    """A `PromptTokenizer` that always answers (the simulator never asks its driver)."""

    def __init__(self) -> None:
        self._ids = _SimIds()

    def encode(self, prompt: Prompt, model: str | None) -> Tokens:
        if len(prompt) > 1 and all(type(p) is Segment for p in prompt):
            return self._ids.mat.prompt(prompt)  # type: ignore[arg-type]
        ids = encode_parts(prompt, self._ids)
        assert ids is not None
        return ids
