"""Routed prompts as chained block hashes: what one replica tells the others it routed,
for engines that publish no cache events (Dynamo's routers do the same in their
approximate mode, from their own routing decisions).

A prompt is cut into blocks of `BLOCK` tokens (the engines' KV block size; the last one
may be shorter); each block's hash chains its parent's, so a hash names the whole prefix
up to its block. An entry names an instance, a time and the prompt's hashes, and carries
the token ids of only the blocks its sender has not published lately: a receiver rebuilds
the prefix from blocks it knows (its own prompts and earlier entries), as far as it can.
Both ends keep a bounded LRU book of blocks.

The hash is Python's own hash of `(parent, tokens)`: for ints and tuples of ints it is
deterministic across processes (only str and bytes are salted), fast, and 64 bits wide.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from flowserve.types.work import Tokens

BLOCK = 16  # tokens per block: vLLM's default KV block size
ROOT = 0  # the parent of a prompt's first block
DEFAULT_BOOK_BLOCKS = 1 << 16  # blocks each book keeps (about a million tokens)
MAX_ENTRY_BLOCKS = 8192  # a longer prompt is shared by its first 131,072 tokens


def block_hashes(tokens: Tokens) -> list[int]:
    """The chained hash of each block of `tokens` (the last block may be shorter)."""
    out: list[int] = []
    parent = ROOT
    for start in range(0, min(len(tokens), MAX_ENTRY_BLOCKS * BLOCK), BLOCK):
        parent = hash((parent, tokens[start:start + BLOCK]))
        out.append(parent)
    return out


def chained(parent: int, tokens: Tokens) -> int:
    return hash((parent, tokens))


@dataclass(frozen=True, slots=True)
class RouteEntry:
    """One routed prompt as peers see it: its block hashes, and the token ids of the
    blocks whose tokens this entry is the first (lately) to carry, by index."""

    replica: str
    instance: str
    time: float
    hashes: tuple[int, ...]
    blocks: tuple[tuple[int, Tokens], ...] = ()


class BlockBook:
    """Known blocks, hash → (parent hash, token ids), least recently used first out."""

    def __init__(self, capacity: int = DEFAULT_BOOK_BLOCKS) -> None:
        assert capacity > 0
        self.capacity = capacity
        self._blocks: OrderedDict[int, tuple[int, Tokens]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, h: int) -> bool:
        return h in self._blocks

    def learn(self, h: int, parent: int, tokens: Tokens) -> None:
        blocks = self._blocks
        if h in blocks:
            blocks.move_to_end(h)
            return
        blocks[h] = (parent, tokens)
        if len(blocks) > self.capacity:
            blocks.popitem(last=False)

    def get(self, h: int) -> tuple[int, Tokens] | None:
        found = self._blocks.get(h)
        if found is not None:
            self._blocks.move_to_end(h)
        return found


class RouteEncoder:
    """The sending side: entries for this replica's routed prompts, each carrying the
    tokens of blocks not published within `republish_s` (so a replica that joined later
    learns them too)."""

    def __init__(self, replica: str, book: BlockBook, republish_s: float = 60.0) -> None:
        self.replica = replica
        self.book = book
        self.republish_s = republish_s
        self._published: OrderedDict[int, float] = OrderedDict()  # hash → when its tokens went out

    def entry(self, instance: str, tokens: Tokens, now: float) -> RouteEntry | None:
        if not tokens:
            return None
        b = BLOCK
        hashes = block_hashes(tokens)
        carried: list[tuple[int, Tokens]] = []
        published = self._published
        parent = ROOT
        for i, h in enumerate(hashes):
            piece = tokens[i * b:(i + 1) * b]
            self.book.learn(h, parent, piece)
            sent = published.get(h)
            if sent is None or now - sent > self.republish_s:
                carried.append((i, piece))
                published[h] = now
                published.move_to_end(h)
            parent = h
        while len(published) > self.book.capacity:
            published.popitem(last=False)
        return RouteEntry(self.replica, instance, now, tuple(hashes), tuple(carried))


class RouteDecoder:
    """The receiving side: the prefix of an entry's prompt this replica can rebuild."""

    def __init__(self, book: BlockBook) -> None:
        self.book = book
        self.unknown_blocks = 0  # blocks named by hash only, never learned: the prefix stopped there

    def tokens(self, e: RouteEntry) -> Tokens:
        hashes = e.hashes
        for i, piece in e.blocks:  # learned first: a carried block's parent is named by hash
            parent = hashes[i - 1] if i else ROOT
            if chained(parent, piece) != hashes[i]:
                raise ValueError(f"block {i} of a routed prompt does not hash to its name")
            self.book.learn(hashes[i], parent, piece)
        out: list[int] = []
        parent = ROOT
        for i, h in enumerate(hashes):
            known = self.book.get(h)
            if known is None or known[0] != parent:
                self.unknown_blocks += len(hashes) - i
                break
            out.extend(known[1])
            parent = h
        return tuple(out)
