"""Text → token ids for the router's prefix index (and for token-id prompts to engines).

The router needs the ids the engine will see, so for a real engine the gateway asks the
engine itself (`/tokenize`, and its chat template for chat requests; see
`flowserve.engines.openai_backend`) and then sends the ids as the prompt: the index and the
engine's cache see exactly the same tokens. Simulated engines have no vocabulary; they
get `WordTokenizer`, a deterministic word-level hash that keeps shared text prefixes
shared token prefixes.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any, Protocol

_PIECE = re.compile(r"\s*[\w]+|\s*[^\w\s]|\s+")


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
    """Word pieces (with their leading space) hashed into a fixed vocabulary."""

    def __init__(self, vocab_size: int = 32000, reserved: int = 256) -> None:
        assert vocab_size > reserved
        self.vocab_size = vocab_size
        self.reserved = reserved

    def encode_sync(self, text: str) -> list[int]:
        span = self.vocab_size - self.reserved
        return [self.reserved + zlib.crc32(p.encode()) % span for p in _PIECE.findall(text)]

    async def encode(self, text: str) -> list[int]:
        return self.encode_sync(text)

    async def render_chat(self, messages: Sequence[dict[str, Any]]) -> str:
        return render_chat_plain(messages)
