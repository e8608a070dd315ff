"""A simulated engine's prefix cache as vLLM reports it: full blocks stored and removed.

The simulated engine keeps a token-level radix cache; this tracks which of its full blocks
are resident and publishes what changes the way vLLM does (`BlockStored` with the block
hashes, the parent's hash and the token ids; `BlockRemoved`), under hashes of its own
(as an engine's are: flowserve must map them to its own). The batches take the gateway's
path: encoded (`encode_batch`), then read back through `RankStream` and the decoder, so
the simulator's index is built by production's code. One batch per drain of the engine.
"""

from __future__ import annotations

from flowserve.kvevents.stream import Apply, Complete, Lost, RankStream
from flowserve.kvevents.wire import Layout, encode_batch
from flowserve.types.kv import BlockRemoved, BlockStored, CacheChange, KVCacheEvents, KVViewChanged
from flowserve.types.work import Tokens

ENGINE_SALT = 0x5EED  # the engine's hash differs from flowserve's, as vLLM's seeded hashes do


def engine_hashes(tokens: Tokens, block_size: int, blocks: int) -> list[int]:
    """The simulated engine's chained hashes of the first `blocks` full blocks of `tokens`."""
    out: list[int] = []
    parent = ENGINE_SALT
    for i in range(blocks):
        parent = hash((ENGINE_SALT, parent, tokens[i * block_size:(i + 1) * block_size]))
        out.append(parent)
    return out


class EngineBlocks:
    def __init__(self, instance: str, block_size: int, layout: Layout = "array") -> None:
        self.instance = instance
        self.block_size = block_size
        self.layout = layout
        self.resident: set[int] = set()
        self.stream = RankStream(0, has_replay=False)
        self._seq = 0
        self._pending: list[CacheChange] = []

    def announce(self, now: float) -> list[KVCacheEvents | KVViewChanged]:
        """The publisher's first batch (seq 0, empty): the subscriber follows it from its start."""
        return self._deliver([], now)

    def stored(self, tokens: Tokens) -> None:
        """`tokens` are in the cache now: their full blocks not yet resident are stored."""
        n = len(tokens) // self.block_size
        if not n:
            return
        hashes = engine_hashes(tokens, self.block_size, n)
        first = next((i for i, h in enumerate(hashes) if h not in self.resident), n)
        if first == n:
            return
        self.resident.update(hashes[first:])
        bs = self.block_size
        self._pending.append(BlockStored(0, tuple(hashes[first:]), hashes[first - 1] if first else None,
                                         tokens[first * bs:n * bs], bs))

    def evicted(self, path: Tokens, start: int) -> None:
        """The cache dropped path[start:]: every full block reaching past `start` is gone."""
        n = len(path) // self.block_size
        first = start // self.block_size
        if first >= n:
            return
        gone = [h for h in engine_hashes(path, self.block_size, n)[first:] if h in self.resident]
        if gone:
            self.resident.difference_update(gone)
            self._pending.append(BlockRemoved(0, tuple(gone)))

    def flush(self, now: float) -> list[KVCacheEvents | KVViewChanged]:
        if not self._pending:
            return []
        changes, self._pending = self._pending, []
        return self._deliver(changes, now)

    def _deliver(self, changes: list[CacheChange], now: float) -> list[KVCacheEvents | KVViewChanged]:
        payload = encode_batch(now, changes, self.layout)
        out: list[KVCacheEvents | KVViewChanged] = []
        for a in self.stream.live(self._seq, payload):
            if isinstance(a, Apply):
                out.append(KVCacheEvents(now, self.instance, a.changes))
            elif isinstance(a, Complete | Lost):
                out.append(KVViewChanged(now, self.instance, isinstance(a, Complete), a.reason))
        self._seq += 1
        return out
