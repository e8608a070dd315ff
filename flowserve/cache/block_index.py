"""The engines' own KV blocks, keyed by flowserve's hash of their token ids (sans-IO).

An engine names its blocks with its own hashes (vLLM: sha256 or Python's hash with a
per-process seed; SGLang: its own), which a router cannot recompute. So every block
stored is keyed here by flowserve's chained hash of its token ids (`block_hash`: the
parent's hash, the LoRA adapter's name and the block's tokens), and each source (an
instance's data-parallel rank) keeps a map from its engine's hashes to flowserve's, so a
`BlockRemoved`, which names only engine hashes, resolves. As in llm-d's kv-cache index
and Dynamo's radix indexer, a block whose parent is unknown cannot be placed (it could
never be matched from a prompt's start) and is counted, not stored.

What the index holds is mirrored into the router's prefix index (`PrefixIndex`, the one
view policies read): an instance caches a block's whole path there while some rank of it
holds the block or a routed prompt speculates it will. A speculative entry (`speculate`:
a prompt just routed there) lasts until the engine confirms the block or its TTL lapses.

Memory is bounded by `budget_bytes`: past it, the least recently stored or used
holdings are dropped (LRU, leaves before their ancestors: a path is touched from its
leaf up) and counted in `evicted`; blocks no source holds are freed. Dynamo's indexer grew
without bound (dynamo #4056); this one stays flat under churn (`flowserve bench kv-events`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from dataclasses import dataclass, fields
from functools import lru_cache

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.types.kv import BlockHash, BlockRemoved, BlockStored
from flowserve.types.work import Tokens

DEFAULT_BUDGET_BYTES = 256 << 20
# Bytes per block record and per holding, measured with tracemalloc in `bench kv-events`
# (a record: object, token tuple, ints; a holding: LRU entry, engine-hash entry, count).
BLOCK_BYTES = 200
TOKEN_BYTES = 36
HOLDING_BYTES = 260


@lru_cache(maxsize=1024)
def _lora_key(name: str | None) -> int:
    if name is None:
        return 0
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")


def block_hash(parent: int | None, tokens: Tokens, lora: str | None = None) -> int:
    """flowserve's chained hash of one block: (parent's hash, adapter, token ids), as vLLM
    chains its block hashes (vllm/v1/core/kv_cache_utils.py `hash_block_tokens`). Stable
    across processes (ints and tuples of ints hash without a seed)."""
    return hash((0 if parent is None else parent, _lora_key(lora), tokens))


def prompt_block_hashes(tokens: Tokens, block_size: int, lora: str | None = None) -> list[int]:
    """The chained hashes of a prompt's full blocks."""
    out: list[int] = []
    parent: int | None = None
    for end in range(block_size, len(tokens) + 1, block_size):
        parent = block_hash(parent, tokens[end - block_size:end], lora)
        out.append(parent)
    return out


class _Block:
    __slots__ = ("depth", "key", "parent", "refs", "tokens")

    def __init__(self, key: int, parent: _Block | None, tokens: Tokens) -> None:
        self.key = key
        self.parent = parent
        self.tokens = tokens
        self.depth = (parent.depth if parent is not None else 0) + len(tokens)
        self.refs = 0  # holdings + speculative entries

    def ref(self, n: int = 1) -> int:
        """`n` more references (fewer, when negative); how many it has now."""
        self.refs += n
        return self.refs

    def path(self) -> Tokens:
        chunks = []
        b: _Block | None = self
        while b is not None:
            chunks.append(b.tokens)
            b = b.parent
        return tuple(t for c in reversed(chunks) for t in c)


@dataclass(frozen=True)
class IndexStats:
    stored: int = 0  # blocks stored (engine events)
    removed: int = 0
    orphans: int = 0  # stored blocks whose parent the index does not know
    unknown_removals: int = 0  # removed hashes the index does not know
    evicted: int = 0  # holdings dropped for the byte budget
    expired: int = 0  # speculative entries whose TTL lapsed unconfirmed
    confirmed: int = 0  # speculative entries the engine confirmed


class BlockIndex:
    def __init__(self, mirror: PrefixIndex | None, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        assert budget_bytes > 0
        self.mirror = mirror
        self.budget_bytes = budget_bytes
        self.blocks: dict[int, _Block] = {}
        self.bytes = 0
        self._counts = dict.fromkeys((f.name for f in fields(IndexStats)), 0)  # IndexStats' counters
        # holdings by source (instance, rank): own hash → engine hash; global LRU over them
        self._engine: dict[tuple[str, int], dict[BlockHash, int]] = {}
        self._held: dict[str, dict[int, int]] = {}  # instance → own hash → ranks holding it
        self._lru: OrderedDict[tuple[str, int, int], BlockHash] = OrderedDict()
        self._spec: dict[str, dict[int, float]] = {}  # instance → own hash → expiry
        self._expiry: deque[tuple[float, str, int]] = deque()  # TTLs are equal: expiries come in order
        self._now = 0.0

    @property
    def stats(self) -> IndexStats:
        """The counters now."""
        return IndexStats(**self._counts)

    # ------------------------------------------------------------------ engine events

    def stored(self, instance: str, ev: BlockStored, now: float) -> int:
        """Blocks `instance`'s rank `ev.rank` stored; returns how many were placed."""
        self._now = max(self._now, now)
        engine = self._engine.setdefault((instance, ev.rank), {})
        parent: _Block | None = None
        if ev.parent_hash is not None:
            own = engine.get(ev.parent_hash)
            if own is None:  # another rank of the instance may know it (ranks hash alike)
                own = next((m[ev.parent_hash] for (i, _), m in self._engine.items()
                            if i == instance and ev.parent_hash in m), None)
            parent = self.blocks.get(own) if own is not None else None
            if parent is None:
                self._counts["orphans"] += len(ev.block_hashes)
                return 0
        held = self._held.setdefault(instance, {})
        spec = self._spec.get(instance)
        size = ev.block_size
        placed: list[_Block] = []
        for i, eh in enumerate(ev.block_hashes):
            chunk = ev.token_ids[i * size:(i + 1) * size]
            own = block_hash(parent.key if parent is not None else None, chunk, ev.lora)
            block = self.blocks.get(own)
            if block is None:
                block = self.blocks[own] = _Block(own, parent, chunk)
                self.bytes += BLOCK_BYTES + TOKEN_BYTES * len(chunk)
            lru_key = (instance, ev.rank, own)
            if lru_key not in self._lru:
                old = engine.get(eh)
                if old is not None and old != own:  # the engine reused a hash: its old block is gone
                    self._unhold(instance, ev.rank, old, now)
                engine[eh] = own
                self._lru[lru_key] = eh
                held[own] = held.get(own, 0) + 1
                block.ref()
                self.bytes += HOLDING_BYTES
                if spec is not None and spec.pop(own, None) is not None:
                    block.ref(-1)
                    self._counts["confirmed"] += 1
            placed.append(block)
            parent = block
        for block in reversed(placed):  # leaf first: ancestors end up more recent (evicted later)
            self._lru.move_to_end((instance, ev.rank, block.key))
        self._counts["stored"] += len(placed)
        if self.mirror is not None and placed:
            self.mirror.add(placed[-1].path(), instance, now, count=False)
        self._shrink(now)
        return len(placed)

    def removed(self, instance: str, ev: BlockRemoved, now: float) -> None:
        self._now = max(self._now, now)
        engine = self._engine.get((instance, ev.rank), {})
        dropped: list[_Block] = []
        for eh in ev.block_hashes:
            own = engine.get(eh)
            if own is None:
                self._counts["unknown_removals"] += 1
                continue
            self._counts["removed"] += 1
            block = self._unhold(instance, ev.rank, own, now, mirror=False)
            if block is not None:
                dropped.append(block)
        self._drop_mirror(instance, dropped, now)

    def cleared(self, instance: str, rank: int, now: float) -> None:
        """The rank's engine dropped every block (AllBlocksCleared, a restart)."""
        engine = self._engine.get((instance, rank))
        if not engine:
            return
        dropped = [b for own in list(engine.values())
                   if (b := self._unhold(instance, rank, own, now, mirror=False)) is not None]
        self._drop_mirror(instance, dropped, now)

    def forget(self, instance: str) -> None:
        """The instance left the cluster: everything about it goes (its mirror is the caller's)."""
        for rank in [r for (i, r) in self._engine if i == instance]:
            for own in list(self._engine[(instance, rank)].values()):
                self._unhold(instance, rank, own, self._now, mirror=False)
            del self._engine[(instance, rank)]
        for own in self._spec.pop(instance, {}):
            self._unref(self.blocks.get(own))
        self._held.pop(instance, None)

    # ------------------------------------------------------------------ speculation

    def speculate(self, instance: str, tokens: Tokens, block_size: int, lora: str | None, until: float) -> None:
        """A prompt routed to `instance`: its full blocks the instance does not hold are
        taken as cached there until `until`, unless the engine confirms them before."""
        held = self._held.get(instance, {})
        spec = self._spec.setdefault(instance, {})
        parent: _Block | None = None
        for end in range(block_size, len(tokens) + 1, block_size):
            chunk = tokens[end - block_size:end]
            own = block_hash(parent.key if parent is not None else None, chunk, lora)
            block = self.blocks.get(own)
            if block is None:
                block = self.blocks[own] = _Block(own, parent, chunk)
                self.bytes += BLOCK_BYTES + TOKEN_BYTES * len(chunk)
            if own not in held:
                if own not in spec:
                    block.ref()
                spec[own] = until
                self._expiry.append((until, instance, own))
            parent = block

    def expire(self, now: float) -> None:
        """Speculative entries whose TTL lapsed unconfirmed leave the view."""
        q = self._expiry
        dropped: dict[str, list[_Block]] = {}
        while q and q[0][0] <= now:
            until, instance, own = q.popleft()
            spec = self._spec.get(instance)
            if spec is None or spec.get(own) != until:
                continue  # confirmed, or routed there again since
            del spec[own]
            self._counts["expired"] += 1
            block = self.blocks.get(own)
            if block is not None:
                dropped.setdefault(instance, []).append(block)
                self._unref(block)
        for instance, blocks in dropped.items():
            self._drop_mirror(instance, blocks, now)

    # ------------------------------------------------------------------ reads

    def holds(self, instance: str, tokens: Tokens, block_size: int, lora: str | None = None) -> int:
        """Prompt tokens in full blocks some rank of `instance` holds, from the start."""
        held = self._held.get(instance, {})
        n = 0
        for own in prompt_block_hashes(tokens, block_size, lora):
            if own not in held:
                break
            n += block_size
        return n

    def split(self, instance: str, tokens: Tokens, block_size: int, routed_until: float,
              lora: str | None = None) -> tuple[int, int]:
        """(confirmed, speculative) prompt tokens in full blocks, from the start: the blocks some
        rank of `instance` holds, then those it holds or was routed (speculative entries lasting
        until `routed_until` or later: routed recently enough), up to the first it has neither."""
        held = self._held.get(instance, {})
        spec = self._spec.get(instance, {})
        confirmed = speculative = 0
        for own in prompt_block_hashes(tokens, block_size, lora):
            if not speculative and own in held:
                confirmed += block_size
            elif own in held or spec.get(own, -1.0) >= routed_until:
                speculative += block_size
            else:
                break
        return confirmed, speculative

    def held_blocks(self, instance: str) -> int:
        return len(self._held.get(instance, {}))

    def speculative_blocks(self, instance: str) -> int:
        return len(self._spec.get(instance, {}))

    def paths(self, instance: str) -> list[Tokens]:
        """Every path `instance` holds or speculates (leaves only): to rebuild its mirror."""
        own = set(self._held.get(instance, {})) | set(self._spec.get(instance, {}))
        blocks = [self.blocks[o] for o in own if o in self.blocks]
        inner = {id(b.parent) for b in blocks if b.parent is not None}
        return [b.path() for b in blocks if id(b) not in inner]

    # ------------------------------------------------------------------ internals

    def _unhold(self, instance: str, rank: int, own: int, now: float, mirror: bool = True) -> _Block | None:
        """Drop one holding; returns the block when the instance no longer has it at all."""
        eh = self._lru.pop((instance, rank, own), None)
        if eh is None:
            return None
        engine = self._engine.get((instance, rank))
        if engine is not None and engine.get(eh) == own:
            del engine[eh]
        self.bytes -= HOLDING_BYTES
        held = self._held[instance]
        left = held[own] - 1
        block = self.blocks.get(own)
        if left:
            held[own] = left
            self._unref(block)
            return None
        del held[own]
        gone = block is not None and own not in self._spec.get(instance, {})
        self._unref(block)
        if not gone:
            return None
        assert block is not None
        if mirror:
            self._drop_mirror(instance, [block], now)
        return block

    def _unref(self, block: _Block | None) -> None:
        if block is None:
            return
        if block.ref(-1) <= 0 and self.blocks.get(block.key) is block:
            del self.blocks[block.key]
            self.bytes -= BLOCK_BYTES + TOKEN_BYTES * len(block.tokens)

    def _drop_mirror(self, instance: str, blocks: list[_Block], now: float) -> None:
        """The instance no longer has these blocks: remove each from its view, once per
        subtree (dropping a block drops what hangs below it for that instance)."""
        if self.mirror is None or not blocks:
            return
        ids = {id(b) for b in blocks}
        for b in blocks:
            if b.parent is not None and id(b.parent) in ids:
                continue
            self.mirror.discard(instance, b.path(), b.depth - len(b.tokens), now)

    def _shrink(self, now: float) -> None:
        while self.bytes > self.budget_bytes and self._lru:
            (instance, rank, own), _ = next(iter(self._lru.items()))
            self._counts["evicted"] += 1
            self._unhold(instance, rank, own, now)
