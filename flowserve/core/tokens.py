"""How the core turns a resolved prompt into token ids.

A driver hands the core a `PromptTokenizer` when it can tokenize without IO (the
simulator always can; the gateway when it has the model's tokenizer locally). For a
prompt the tokenizer declines (returns None), the core asks the driver with a
`Tokenize` command and waits for `Tokenized`.
"""

from __future__ import annotations

from typing import Protocol

from flowserve.graph.plan import Materializer
from flowserve.graph.prompt import Prompt, Segment, Toks
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
