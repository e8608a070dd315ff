"""A request inside a simulated engine, and what the engine can admit next."""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.cache.radix import RadixNode
from flowserve.types.work import LLMCall

WAITING, PREFILL, DECODE, DONE = range(4)


class Seq:
    __slots__ = ("cached", "call", "first_token", "gen_base", "iter_base", "kv", "lock", "matched", "need",
                 "order", "pending", "preemptions", "prefill_left", "prefilled", "prompt_len",
                 "started", "state", "target")

    def __init__(self, call: LLMCall, order: int, target: int) -> None:
        self.call = call
        self.order = order
        self.prompt_len = call.input_tokens
        self.target = max(1, min(target, call.max_tokens))
        self.state = WAITING
        self.cached = 0  # prompt tokens found in the prefix cache at the last admission
        self.kv = 0  # private KV tokens held (at iter_base while decoding)
        self.pending = 0  # recompute: already generated tokens to prefill again
        self.prefill_left = 0
        self.prefilled = 0  # tokens this sequence ever prefilled (invariant checks)
        self.gen_base = 0  # generated tokens at iter_base
        self.iter_base = 0
        self.lock: RadixNode | None = None
        self.need = 0  # KV tokens admission needs (estimate while waiting)
        self.matched: tuple[int, RadixNode] | None = None  # (tree version, longest cached prefix)
        self.started: float | None = None
        self.first_token: float | None = None
        self.preemptions = 0

    def generated(self, dec_iter: int) -> int:
        if self.state == DECODE:
            return self.gen_base + (dec_iter - self.iter_base)
        return self.gen_base

    def kv_now(self, dec_iter: int) -> int:
        if self.state == DECODE:
            return self.kv + (dec_iter - self.iter_base)
        return self.kv


@dataclass(frozen=True, slots=True)
class Capacity:
    free_seqs: int
    headroom_tokens: int
    kv_free_tokens: int
