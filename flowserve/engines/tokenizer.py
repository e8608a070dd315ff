"""Text → token ids for the router's prefix index (and for token-id prompts to engines).

The router needs the ids the engine will see, so for a real engine the gateway asks the
engine itself (`/tokenize`, and its chat template for chat requests; see
`flowserve.engines.openai_backend`) and then sends the ids as the prompt: the index and the
engine's cache see exactly the same tokens. Simulated engines have no vocabulary; they
get `WordTokenizer`, a deterministic word-level hash that keeps shared text prefixes
shared token prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from flowserve.graph.prompt import Segment
from flowserve.sim.tokenizer import RESERVED, VOCAB, word_ids
from flowserve.types.work import Tokens

RESERVED_IDS = 16  # keep clear of BOS/EOS and other special tokens at the low end


class Tokenizer(Protocol):
    async def encode(self, text: str) -> list[int]: ...

    async def render_chat(self, messages: Sequence[dict[str, Any]]) -> str: ...


def render_chat_plain(messages: Sequence[dict[str, Any]]) -> str:
    """A neutral chat layout for engines without a template: one `<|role|>` block each."""
    parts = [f"<|{m.get('role', 'user')}|>\n{message_text(m)}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"


def message_text(m: dict[str, Any]) -> str:
    """A message's content as text (OpenAI allows a string or a list of text parts)."""
    content = m.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


class WordTokenizer:
    """Word pieces (with their leading space) hashed into a fixed vocabulary: the
    simulator's tokenizer (`flowserve.sim.tokenizer.word_ids`)."""

    def __init__(self, vocab_size: int = VOCAB, reserved: int = RESERVED) -> None:
        assert vocab_size > reserved
        self.vocab_size = vocab_size
        self.reserved = reserved

    def encode_sync(self, text: str) -> list[int]:
        return word_ids(text, self.vocab_size, self.reserved)

    async def encode(self, text: str) -> list[int]:
        return self.encode_sync(text)

    async def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        return render_chat_plain(messages)


class TokenMaterializer:
    """Segments → token ids a real engine accepts, for replays: segment s is a
    pseudo-random run of ids from the model's vocabulary seeded by (salt, s), so equal
    segments are equal tokens, a shorter segment of the same id is a prefix of the
    longer one, and different segments differ from their first tokens on — the sharing
    structure the simulator sees, in real tokens."""

    def __init__(self, vocab_size: int, salt: int = 0) -> None:
        assert vocab_size > 2 * RESERVED_IDS
        self.vocab = vocab_size
        self.salt = salt
        self._cache: dict[int, np.ndarray] = {}

    def segment(self, seg: Segment) -> Tokens:
        run = self._cache.get(seg.id)
        if run is None or len(run) < seg.length:
            rng = np.random.default_rng([self.salt, seg.id])
            run = rng.integers(RESERVED_IDS, self.vocab - RESERVED_IDS, size=max(seg.length, 64))
            self._cache[seg.id] = run
        return tuple(int(t) for t in run[: seg.length])

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out: Tokens = ()
        for seg in segments:
            out += self.segment(seg)
        return out
