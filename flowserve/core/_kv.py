"""The core's book of the engines' cache events: which instances' views are precise.

An instance with `kv_events` publishes what its prefix cache does; the driver decodes it
into `KVCacheEvents`, which this book applies to the block index (`flowserve.cache.
block_index`), mirrored into the router's prefix index — the one view policies read. While
an instance's stream is complete (`KVViewChanged(precise=True)`) its view is the index:
a prompt routed there is speculative until the engine confirms its blocks or, once its
call left the instance, the TTL lapses (a call waiting in the engine's queue keeps it:
under load the wait outlasts any TTL, and a router that forgot where it sent a prefix
scatters its group); the estimate's evictions are ignored, and a finished call adds
nothing. While it is not (a gap the replay could not fill) its view is the estimate
again: routed prompts stay, the estimate's evictions apply, events still apply (they are
true). When it becomes complete again its view is rebuilt from the index. Instances without events keep the
estimate throughout; where the engine tells what its slots hold (`SlotsResident`, read from
llama-server's `/slots`) those prompts top the estimate up — still an estimate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from flowserve.cache.block_index import DEFAULT_BUDGET_BYTES, BlockIndex, IndexStats
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.types.kv import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvents,
    KVViewChanged,
    SlotsResident,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Tokens

DEFAULT_TTL_S = 10.0  # a routed prompt's blocks count as cached this long after its call, unless confirmed


@dataclass(frozen=True, slots=True)
class KVSettings:
    """budget_bytes: the block index's memory (LRU beyond); speculative_ttl_s: how long a
    routed prompt counts as cached on its instance, unconfirmed, once its call left it."""

    budget_bytes: int = DEFAULT_BUDGET_BYTES
    speculative_ttl_s: float = DEFAULT_TTL_S


@dataclass(frozen=True, slots=True)
class KVViewStatus:
    """One instance's view, as drivers report it (/status, /metrics, /health)."""

    instance: str
    precise: bool
    reason: str
    blocks: int  # held by some rank
    speculative: int
    block_size_mismatches: int
    slot_prompts: int | None = None  # estimated, topped up from the engine's slots: prompts read so far


class _Instance:
    __slots__ = ("block_size", "mismatches", "precise", "reason")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.precise = False
        self.reason = "no events yet"
        self.mismatches = 0

    def mismatch(self) -> None:
        """A block of another size than configured (counted: the view may be off)."""
        self.mismatches += 1

    def viewed(self, precise: bool, reason: str) -> bool:
        """The engine's view is (no longer) precise; whether it just became so."""
        became = precise and not self.precise
        self.precise, self.reason = precise, reason
        return became


class KVBook:
    def __init__(self, mirror: PrefixIndex | None, settings: KVSettings,
                 placed: Callable[[int], str | None] = lambda call_id: None) -> None:
        """placed: where a live call is (None once it ended): its routed prompt stays speculative
        there while it waits or runs."""
        self.mirror = mirror
        self._placed = placed
        self._renew: deque[tuple[float, int, str, Tokens]] = deque()  # (lapses at, call, instance, prompt)
        self.settings = settings
        self.index = BlockIndex(mirror, settings.budget_bytes)
        self._inst: dict[str, _Instance] = {}
        self._slots: dict[str, int] = {}  # instance → prompts its slots were read to hold

    # ------------------------------------------------------------------ instances

    def add(self, spec: InstanceSpec) -> None:
        kv = spec.kv_events
        if kv is None:
            self._inst.pop(spec.name, None)
            return
        known = self._inst.get(spec.name)
        if known is None or known.block_size != kv.block_size:
            self._inst[spec.name] = _Instance(kv.block_size)
        elif known.precise:
            self._remirror(spec.name, 0.0)  # back up: the core dropped its view when it went down

    def forget(self, name: str) -> None:
        self._slots.pop(name, None)
        if self._inst.pop(name, None) is not None:
            self.index.forget(name)

    def precise(self, name: str) -> bool:
        inst = self._inst.get(name)
        return inst is not None and inst.precise

    # ------------------------------------------------------------------ events

    def on_events(self, ev: KVCacheEvents) -> None:
        inst = self._inst.get(ev.instance)
        if inst is None:
            return  # not (or no longer) configured for events
        idx = self.index
        for c in ev.changes:
            if isinstance(c, BlockStored):
                if c.block_size != inst.block_size:
                    inst.mismatch()
                idx.stored(ev.instance, c, ev.time)
            elif isinstance(c, BlockRemoved):
                idx.removed(ev.instance, c, ev.time)
            elif isinstance(c, AllBlocksCleared):
                idx.cleared(ev.instance, c.rank, ev.time)

    def on_view(self, ev: KVViewChanged) -> None:
        inst = self._inst.get(ev.instance)
        if inst is None:
            return
        if inst.viewed(ev.precise, ev.reason):
            self._remirror(ev.instance, ev.time)

    def on_slots(self, ev: SlotsResident) -> None:
        """The engine's slots hold these prompts: cached there, whatever the estimate thought."""
        self._slots[ev.instance] = self._slots.get(ev.instance, 0) + len(ev.prompts)
        if self.mirror is None or self.precise(ev.instance):
            return  # a precise view has the engine's every block already
        for prompt in ev.prompts:
            self.mirror.add(prompt, ev.instance, ev.time, count=False)

    def expire(self, now: float) -> None:
        ttl, q = self.settings.speculative_ttl_s, self._renew
        while q and q[0][0] <= now:  # in order: every entry lapses one TTL after it was made
            _, call_id, instance, prompt = q.popleft()
            inst = self._inst.get(instance)
            if inst is not None and inst.precise and self._placed(call_id) == instance:
                self.index.speculate(instance, prompt, inst.block_size, None, now + ttl)  # still there: renewed
                q.append((now + ttl, call_id, instance, prompt))
        self.index.expire(now)

    # ------------------------------------------------------------------ routed prompts

    def routed_tokens(self, prompt: Tokens, instance: str) -> Tokens:
        """What of a prompt routed to `instance` the view takes as cached there: for a precise
        instance its full blocks only (engines cache nothing smaller), else all of it."""
        inst = self._inst.get(instance)
        if inst is None or not inst.precise or len(prompt) % inst.block_size == 0:
            return prompt
        return prompt[:len(prompt) - len(prompt) % inst.block_size]

    def routed(self, call: LLMCall, instance: str, now: float) -> None:
        """The core routed `call` there (and added `routed_tokens` to the view): for a precise
        instance they count as cached only until the TTL, unless the engine confirms them."""
        inst = self._inst.get(instance)
        if inst is not None and inst.precise:
            until = now + self.settings.speculative_ttl_s
            self.index.speculate(instance, call.prompt, inst.block_size, None, until)
            self._renew.append((until, call.id, instance, call.prompt))

    def split(self, instance: str, prompt: Tokens, max_age_s: float, now: float) -> tuple[int, int] | None:
        """(confirmed, speculative) prompt tokens of a precise instance's view (None where it is
        not precise): the blocks its engine holds, then the blocks routed there at most
        `max_age_s` ago (or renewed since: their call still waits or runs there)."""
        inst = self._inst.get(instance)
        if inst is None or not inst.precise:
            return None
        routed_until = now - max_age_s + self.settings.speculative_ttl_s  # an entry lasts one TTL from its routing
        return self.index.split(instance, prompt, inst.block_size, routed_until)

    def keeps_estimate(self, instance: str) -> bool:
        """Whether the estimate's updates (finished prompts, estimated evictions) apply."""
        return not self.precise(instance)

    # ------------------------------------------------------------------ reads

    def views(self) -> list[KVViewStatus]:
        idx = self.index
        return [KVViewStatus(name, i.precise, i.reason, idx.held_blocks(name), idx.speculative_blocks(name),
                             i.mismatches, self._slots.get(name)) for name, i in self._inst.items()] + [
            KVViewStatus(name, False, "the engine publishes no cache events; topped up from its slots", 0, 0, 0, n)
            for name, n in self._slots.items() if name not in self._inst]

    def publishing(self) -> bool:
        """Whether some instance publishes cache events (the block index is in use)."""
        return bool(self._inst)

    @property
    def stats(self) -> IndexStats:
        return self.index.stats

    @property
    def bytes(self) -> int:
        return self.index.bytes

    def _remirror(self, name: str, now: float) -> None:
        if self.mirror is None:
            return
        self.mirror.remove_instance(name)
        for path in self.index.paths(name):
            self.mirror.add(path, name, now, count=False)
