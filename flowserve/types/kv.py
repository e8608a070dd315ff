"""The engines' own KV-cache events, as the core takes them, and where an instance publishes them.

vLLM and SGLang publish what their prefix cache does (`--kv-events-config`): blocks stored
(with their token ids), blocks removed, everything cleared. A driver decodes them
(`flowserve.kvevents.wire`) and hands them to the core as one `KVCacheEvents` per batch it
read; `KVViewChanged` says when an instance's stream became incomplete (a gap the replay
socket could not fill) or complete again. The core keeps the block index from them
(`flowserve.core._kv`). Plain frozen data, like every event.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.types.work import Tokens

BlockHash = int | bytes  # what engines send: 64-bit ints (SGLang, older vLLM) or digests (vLLM's sha256)


@dataclass(frozen=True, slots=True)
class KVEventsSpec:
    """Where an instance publishes its cache events (the instance's `kv_events:` entry).

    endpoint: the engine's PUB socket (data-parallel rank r publishes on its port + r, as
    vLLM does); replay: its ROUTER socket for missed batches (None: none); topic: the
    subscription prefix; block_size: tokens per KV block, the engine's; data_parallel_size:
    ranks, each with its own cache and sequence numbers."""

    endpoint: str
    replay: str | None = None
    topic: str = ""
    block_size: int = 16
    data_parallel_size: int = 1


@dataclass(frozen=True, slots=True)
class BlockStored:
    """Consecutive blocks the engine cached: `block_hashes[0]`'s parent is `parent_hash`
    (None: the first block of a sequence); `token_ids` are theirs, `block_size` each."""

    rank: int
    block_hashes: tuple[BlockHash, ...]
    parent_hash: BlockHash | None
    token_ids: Tokens
    block_size: int
    lora: str | None = None


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    rank: int
    block_hashes: tuple[BlockHash, ...]


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    rank: int


CacheChange = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(frozen=True, slots=True)
class KVCacheEvents:
    """What one instance's cache did, in the engine's order (one or more batches read together)."""

    time: float
    instance: str
    changes: tuple[CacheChange, ...]


@dataclass(frozen=True, slots=True)
class KVViewChanged:
    """The instance's event stream is complete (`precise`: its view comes from the block
    index) or has a hole it could not fill (its view falls back to the estimate), and why."""

    time: float
    instance: str
    precise: bool
    reason: str


@dataclass(frozen=True, slots=True)
class SlotsResident:
    """What an engine without cache events holds, read from its slots (llama-server's
    `/slots`): the prompts resident in slots that changed since the last read, as token ids.
    They top up the estimate (an engine's own word that they are cached); the view stays
    estimated, since a read says nothing of what went before it or comes after."""

    time: float
    instance: str
    prompts: tuple[Tokens, ...]
