"""A simulated llama-server: the continuous-batching engine of `sim/engine.py` with
llama-server's slot caches instead of a radix-tree prefix cache.

What changes against the vLLM/SGLang model (`flowserve.profiles.slot_config` describes
the server's rules, read from tools/server/server-context.cpp and server-task.cpp):

* a request takes an idle slot as soon as one is free (no token-budget throttle) and the
  slot is chosen by prompt similarity, else least recently used (`choose_slot`);
* it reuses only the common prefix of *that* slot's kept tokens: two slots holding the
  same document each paid for it, and a request that arrives while its prefix is still
  being computed on a busy slot computes it again;
* with `--cache-ram`, the state of a slot about to lose its content is saved in a host
  RAM cache (`RamCache`) and the best saved state is restored into the slot; with
  `--cache-idle-slots` every idle slot is saved whenever a request starts, and cleared
  too under `--kv-unified`;
* with `--kv-unified` idle slots keep cells of the shared KV and are purged one by one
  (lowest id first) when a request needs room; without it each slot owns `-c / -np`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from flowserve.errors import FailureKind
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.slot_config import SlotConfig
from flowserve.sim.engine import SimEngine
from flowserve.sim.sequence import WAITING, Capacity, Seq
from flowserve.types.events import CallFailed, CallFinished, CallProgress, PrefixEvicted
from flowserve.types.specs import EngineParams
from flowserve.types.work import LLMCall, Tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Slot:
    id: int
    tokens: Tokens = ()  # the prompt whose KV the slot keeps (generated ids are not known)
    length: int = 0  # KV cells it keeps: that prompt and the tokens generated after it
    busy: bool = False
    last_used: float = -1.0  # llama-server's t_last_used (-1: never)

    def keep(self, tokens: Tokens, length: int) -> None:
        """It keeps the KV of `tokens` (`length` cells: the prompt and what followed it)."""
        self.tokens, self.length = tokens, length

    def clear(self) -> Tokens:
        """Its cells are purged; what it kept."""
        old, self.tokens, self.length = self.tokens, (), 0
        return old

    def take(self) -> None:
        """A request runs in it (its cells are the request's from now on)."""
        self.busy, self.tokens, self.length = True, (), 0

    def give_back(self, tokens: Tokens, length: int, now: float | None = None) -> None:
        """Idle again, keeping `tokens` (`now`: when its request ended; None: it never started)."""
        self.busy, self.tokens, self.length = False, tokens, length
        if now is not None:
            self.last_used = now


def choose_slot(slots: Sequence[Slot], prompt: Tokens, similarity: float) -> tuple[Slot, bool] | None:
    """llama-server's get_available_slot: (slot, update_cache) or None when all are busy.
    The idle slot with the highest LCP(slot, prompt) / len(prompt) above `similarity`
    wins (first on ties); its content is worth saving only if it keeps < 50% of it.
    Else the idle slot least recently used (the last of equals), always worth saving."""
    best, sim_best = None, 0.0
    if similarity > 0:
        for s in slots:
            if s.busy or not s.tokens:
                continue
            sim = common_prefix(s.tokens, prompt) / len(prompt)
            if sim > sim_best and sim > similarity:
                best, sim_best = s, sim
        if best is not None:
            return best, sim_best * len(prompt) / best.length < 0.5
    lru = None
    for s in slots:
        if not s.busy and (lru is None or s.last_used <= lru.last_used):
            lru = s
    return None if lru is None else (lru, True)


@dataclass
class RamState:
    tokens: Tokens
    length: int


class RamCache:
    """llama-server's server_prompt_cache: saved slot states, oldest first, at most
    `limit` tokens (None: unbounded)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.states: list[RamState] = []

    @property
    def tokens(self) -> int:
        return sum(s.length for s in self.states)

    def save(self, tokens: Tokens, length: int) -> None:
        """Keep a slot's state unless a saved one already contains it or it exceeds the
        limit; drop saved states it contains."""
        if any(common_prefix(s.tokens, tokens) == len(tokens) for s in self.states):
            return
        if self.limit is not None and length > self.limit:
            return
        self.states = [s for s in self.states if common_prefix(s.tokens, tokens) < len(s.tokens)]
        self.states.append(RamState(tokens, length))

    def load(self, slot: Slot, prompt: Tokens) -> None:
        """Restore into `slot` the saved state that keeps more of itself (f_keep ≥ 0.25)
        and matches more of `prompt` than the slot's own content; it leaves the cache."""
        lcp = common_prefix(slot.tokens, prompt)
        f_keep = lcp / slot.length if slot.length else -1.0
        sim = lcp / len(prompt)
        best = None
        for st in self.states:
            cur = common_prefix(st.tokens, prompt)
            f_cur, sim_cur = cur / st.length, cur / len(prompt)
            if f_cur < 0.25:
                continue
            if f_keep < f_cur and sim < sim_cur:
                best, f_keep, sim = st, f_cur, sim_cur
        if best is not None:
            self.states.remove(best)
            slot.keep(best.tokens, best.length)

    def update(self) -> list[RamState]:
        """Evict the oldest states beyond the limit; returns them."""
        dropped = []
        while self.limit is not None and self.states and self.tokens > self.limit:
            dropped.append(self.states.pop(0))
        return dropped


class SlotEngine(SimEngine):
    """`SimEngine` with llama-server's slots (module docstring); `params.max_num_seqs` slots."""

    def __init__(self, name: str, params: EngineParams, cost: CostModel, kv_capacity: int,
                 config: SlotConfig, report_evictions: bool = False, report_prefill: bool = False) -> None:
        super().__init__(name, replace(params, prefix_caching=False, block_size=1), cost, kv_capacity,
                         report_evictions, report_prefill)
        self.config = config
        self.slots = [Slot(i) for i in range(params.max_num_seqs)]
        self.slot_ctx = self.capacity_tokens if config.kv_unified else self.capacity_tokens // len(self.slots)
        self.ram = None if config.cache_ram_tokens == 0 else RamCache(config.cache_ram_tokens)
        self.held = 0  # KV cells idle slots keep
        self._slot_of: dict[int, Slot] = {}

    def submit(self, call: LLMCall, now: float, output_tokens: int | None = None, marks: tuple[int, ...] = ()
               ) -> list[CallFinished | CallFailed | PrefixEvicted | CallProgress]:
        if call.input_tokens + 1 > self.slot_ctx:
            return [CallFailed(now, call.id, self.name,
                               f"prompt of {call.input_tokens} tokens exceeds the slot context of "
                               f"{self.slot_ctx} tokens on {self.name}", True, FailureKind.CONTEXT_OVERFLOW)]
        return super().submit(call, now, output_tokens, marks)

    @property
    def used(self) -> int:
        return self.private + self.held

    def capacity(self) -> Capacity:
        waiting_need = sum(s.need for s in self.waiting)
        idle = sum(1 for s in self.slots if not s.busy)
        backlog = sum(s.prefill_left for s in self.prefilling) + waiting_need
        return Capacity(free_seqs=idle - len(self.waiting),
                        headroom_tokens=self.p.token_budget - len(self.decoding) - backlog,
                        kv_free_tokens=self.capacity_tokens - self.private - waiting_need)

    def _match(self, s: Seq, now: float) -> int:
        """The cached tokens `s` would find in the slot it would take now (an estimate
        while it waits: admission chooses again)."""
        pick = choose_slot(self.slots, s.call.prompt, self.config.similarity)
        return 0 if pick is None else min(common_prefix(pick[0].tokens, s.call.prompt), s.prompt_len - 1)

    def _admit(self, now: float) -> None:
        self._ensure_decode_room(now)
        while self.waiting:
            s = self.waiting[0]
            pick = choose_slot(self.slots, s.call.prompt, self.config.similarity)
            if pick is None:
                break
            slot, update_cache = pick
            if update_cache and self.ram is not None:
                if slot.tokens:
                    self.ram.save(slot.tokens, slot.length)
                self.held -= slot.length
                self.ram.load(slot, s.call.prompt)  # an empty slot takes any saved state that fits
                self.held += slot.length
                for st in self.ram.update():
                    self._report(st.tokens)
            cached = min(common_prefix(slot.tokens, s.call.prompt), s.prompt_len - 1)
            old = slot.tokens
            self.held -= slot.length
            slot.take()
            if cached < len(old) and (self.ram is None or not update_cache):
                self._report(old, cached)  # the slot drops what lies beyond the common prefix
            uncached = s.prompt_len - cached + s.pending
            if not self._reserve(uncached + 1 + len(self.decoding), now):
                slot.give_back(s.call.prompt[:cached], cached)
                self.held += cached
                break
            self.waiting.popleft()
            self._slot_of[s.call.id] = slot
            s.admit(cached, cached + uncached, uncached, now)
            self.private += cached + uncached
            self.stats["cached"] += cached
            self.prefilling.append(s)
            self._cache_idle_slots()

    def _cache_idle_slots(self) -> None:
        """--cache-idle-slots after a request starts: idle slots go to the RAM cache and,
        sharing the KV, leave it."""
        if self.ram is None or not self.config.cache_idle_slots:
            return
        for slot in self.slots:
            if slot.busy or not slot.tokens:
                continue
            self.ram.save(slot.tokens, slot.length)
            for st in self.ram.update():
                self._report(st.tokens)
            if self.config.kv_unified:
                self.held -= slot.length
                slot.clear()

    def _free(self, s: Seq) -> None:
        length = s.kv_now(self.dec_iter)
        super()._free(s)
        slot = self._slot_of.pop(s.call.id, None)
        if slot is not None:  # the slot keeps the request's prompt and output
            slot.give_back(s.call.prompt, length, self._now)
            self.held += length

    def _reserve(self, tokens: int, now: float, keep: object = None) -> bool:
        """Room for `tokens` more cells: a slot owns its cells without --kv-unified;
        with it, idle slots are purged lowest id first."""
        if not self.config.kv_unified:
            return True
        for slot in self.slots:
            if tokens <= self.capacity_tokens - self.used:
                return True
            if not slot.busy and slot.length:
                self.held -= slot.length
                self.stats["evicted"] += slot.length
                self._report(slot.clear())
        return tokens <= self.capacity_tokens - self.used

    def _report(self, tokens: Tokens, kept: int = 0) -> None:
        """A prefix index learns that `tokens` beyond `kept` and beyond what another slot
        or saved state still holds left this engine."""
        if not self.report_evictions or not tokens:
            return
        keep = max((common_prefix(h, tokens) for h in self._holders()), default=kept)
        keep = max(keep, kept)
        if keep < len(tokens):
            self._events.append(PrefixEvicted(self._now, self.name, tokens, keep))

    def _holders(self) -> list[Tokens]:
        held = [s.tokens for s in self.slots if s.tokens]
        held += [s.call.prompt for s in self.seqs.values() if s.state != WAITING]
        if self.ram is not None:
            held += [st.tokens for st in self.ram.states]
        return held


def make_engine(name: str, params: EngineParams, cost: CostModel, kv_capacity: int,
                report_evictions: bool = False, report_prefill: bool = False) -> SimEngine:
    """The engine model of an instance's kind: llama-server's slots when its profile says
    so (`FittedCostModel.slot_config`), else the vLLM/SGLang-like engine."""
    config = cost.slot_config
    if config is not None:
        return SlotEngine(name, params, cost, kv_capacity, config, report_evictions, report_prefill)
    return SimEngine(name, params, cost, kv_capacity, report_evictions, report_prefill)
