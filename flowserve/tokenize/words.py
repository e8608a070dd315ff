"""Text → token ids without a vocabulary: word pieces (with their leading space) hashed
into a fixed id range (crc32, not Python's salted hash), so a shared text prefix is a
shared token prefix, as with a real tokenizer. The simulator's engines and the
gateway's simulated engines tokenize text this way."""

from __future__ import annotations

import re
import zlib

from flowserve.graph.prompt import Chat, Lit
from flowserve.tokenize.chat import chat_parts

_PIECE = re.compile(r"\s*[\w]+|\s*[^\w\s]|\s+")
# where whitespace follows a non-space character a piece always begins: the text can be
# cut there without changing its pieces
_CUT = re.compile(r"(?<=\S)\s")
VOCAB = 32000
RESERVED = 256
CHUNK_CHARS = 1 << 16


def word_ids(text: str, vocab_size: int = VOCAB, reserved: int = RESERVED, chunk: int = CHUNK_CHARS) -> list[int]:
    """Deterministic word-level ids (crc32, not Python's salted hash). A long text is
    matched in chunks, so a thread tokenizing it lets the others run between them (one
    regex call over megabytes would hold the GIL throughout)."""
    span = vocab_size - reserved
    return [reserved + zlib.crc32(p.encode()) % span for part in _chunks(text, chunk) for p in _PIECE.findall(part)]


def _chunks(text: str, size: int) -> list[str]:
    out, start = [], 0
    while len(text) - start > size:
        cut = _CUT.search(text, start + size)
        if cut is None:
            break
        out.append(text[start:cut.start()])
        start = cut.start()
    out.append(text[start:])
    return out


class WordTokenizer:
    """Word pieces (with their leading space) hashed into a fixed vocabulary: the
    simulator's (`word_ids`), with async `encode` and the plain chat layout."""

    def __init__(self, vocab_size: int = VOCAB, reserved: int = RESERVED) -> None:
        assert vocab_size > reserved
        self.vocab_size = vocab_size
        self.reserved = reserved

    def encode_sync(self, text: str) -> list[int]:
        return word_ids(text, self.vocab_size, self.reserved)

    async def encode(self, text: str) -> list[int]:
        return self.encode_sync(text)

    async def encode_chat(self, chat: Chat) -> list[int]:
        """The neutral layout (`chat_parts`) of a chat of text turns."""
        return [t for p in chat_parts(chat) if isinstance(p, Lit) for t in self.encode_sync(p.text)]
