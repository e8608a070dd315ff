"""The simulator's tokenizer: token ids for prompts of the workflow IR, without a vocabulary.

* text: word pieces (with their leading space) hashed into a fixed vocabulary, so a
  shared text prefix is a shared token prefix, as with a real tokenizer;
* segments: `Materializer` markers (a negative id, then filler zeros; see
  `flowserve.graph.plan`), which decode back to segments exactly;
* token ids: as they are.
"""

from __future__ import annotations

import re
import zlib

from flowserve.graph.plan import Materializer
from flowserve.graph.prompt import Lit, Out, Prompt, Segment, Toks
from flowserve.types.work import Tokens

_PIECE = re.compile(r"\s*[\w]+|\s*[^\w\s]|\s+")
VOCAB = 32000
RESERVED = 256


def word_ids(text: str, vocab_size: int = VOCAB, reserved: int = RESERVED) -> list[int]:
    """Deterministic word-level ids (crc32, not Python's salted hash)."""
    span = vocab_size - reserved
    return [reserved + zlib.crc32(p.encode()) % span for p in _PIECE.findall(text)]


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
            else:
                assert not isinstance(p, Out), "the runtime resolves Out parts before tokenization"
        return tuple(out)
