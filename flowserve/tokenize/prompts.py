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
from flowserve.graph.prompt import Chat, Lit, Out, Prompt, Segment, Toks
from flowserve.tokenize.chat import chat_parts
from flowserve.tokenize.words import word_ids
from flowserve.types.work import Tokens


class PromptTokenizer(Protocol):
    def encode(self, prompt: Prompt, model: str | None) -> Tokens | None:
        """The prompt's token ids, or None when only the driver can tokenize it."""
        ...


class NoText:
    """The default: token ids as they are, segments as the simulator's markers
    (`Materializer`); text needs a driver's tokenizer."""

    def __init__(self) -> None:
        self._mat = Materializer()

    def encode(self, prompt: Prompt, model: str | None) -> Tokens | None:
        if len(prompt) == 1 and isinstance(prompt[0], Toks):
            return prompt[0].ids
        out: list[int] = []
        for p in prompt:
            if isinstance(p, Toks):
                out.extend(p.ids)
            elif isinstance(p, Segment):
                out.extend(self._mat.segment(p))
            else:
                return None
        return tuple(out)


class SimTokenizer:
    """A `PromptTokenizer` that always answers (the simulator never asks its driver)."""

    def __init__(self) -> None:
        self._mat = Materializer()

    def encode(self, prompt: Prompt, model: str | None) -> Tokens:
        if len(prompt) == 1:  # the common case: one segment list or one token list
            p = prompt[0]
            if isinstance(p, Toks):
                return p.ids
        if all(isinstance(p, Segment) for p in prompt):
            return self._mat.prompt(prompt)  # type: ignore[arg-type]
        out: list[int] = []
        for p in prompt:
            if isinstance(p, Segment):
                out.extend(self._mat.segment(p))
            elif isinstance(p, Toks):
                out.extend(p.ids)
            elif isinstance(p, Lit):
                out.extend(word_ids(p.text))
            elif isinstance(p, Chat):  # no chat template here: the neutral layout
                out.extend(self.encode(chat_parts(p), model))
            else:
                assert not isinstance(p, Out), "the runtime resolves Out parts before tokenization"
        return tuple(out)
