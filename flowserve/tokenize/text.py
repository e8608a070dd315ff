"""Text tokenizers the gateway routes with: a local `tokenizer.json` (the `tokenizers`
library; no round trip) or the engine's own `/tokenize` (`flowserve.engines.client`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from flowserve.errors import FlowserveError

if TYPE_CHECKING:
    from flowserve.engines.client import EngineClient


class Tokenizer(Protocol):
    async def encode(self, text: str) -> list[int]: ...

    async def decode(self, tokens: Sequence[int]) -> str: ...


class LocalTokenizer:
    """A `tokenizer.json` through the `tokenizers` library (no special tokens added)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self._tok = HFTokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise FlowserveError(f"cannot load tokenizer {str(path)!r}: {e}") from None

    def encode_sync(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    async def encode(self, text: str) -> list[int]:
        return self.encode_sync(text)

    def decode_sync(self, tokens: Sequence[int]) -> str:
        return self._tok.decode(list(tokens), skip_special_tokens=False)

    async def decode(self, tokens: Sequence[int]) -> str:
        return self.decode_sync(tokens)


class EngineTokenizer:
    """The engine's `/tokenize` and `/detokenize`."""

    def __init__(self, client: EngineClient) -> None:
        self.client = client

    async def encode(self, text: str) -> list[int]:
        return await self.client.tokenize(text)

    async def decode(self, tokens: Sequence[int]) -> str:
        return await self.client.detokenize(tokens)


def make_tokenizer(client: EngineClient, tokenizer_json: Path | None = None) -> Tokenizer:
    """Local `tokenizer.json` when configured, else the engine's endpoint (see module doc)."""
    return LocalTokenizer(tokenizer_json) if tokenizer_json is not None else EngineTokenizer(client)
