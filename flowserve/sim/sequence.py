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

    # ------------------------------------------------------------------ its moves (the engine's)

    def estimate(self, need: int) -> None:
        """KV tokens its admission needs (an estimate while it waits)."""
        self.need = need

    def match(self, version: int, node: RadixNode) -> None:
        """Its longest cached prefix, as of the tree's `version`."""
        self.matched = (version, node)

    def admit(self, cached: int, kv: int, prefill: int, now: float, lock: RadixNode | None = None) -> None:
        """Admitted now: `cached` prompt tokens found, `kv` private tokens held, `prefill`
        tokens to compute (`lock`: the cached prefix it holds in the tree)."""
        if lock is not None:
            self.lock = lock
        self.cached, self.kv, self.prefill_left = cached, kv, prefill
        self.state = PREFILL
        if self.started is None:
            self.started = now

    def prefill(self, n: int) -> int:
        """`n` more prompt tokens computed; how many are left."""
        self.prefill_left -= n
        self.prefilled += n
        return self.prefill_left

    def cache(self, node: RadixNode, moved: int) -> RadixNode | None:
        """Its prompt is in the tree at `node` (held from now on), and `moved` of its private
        tokens with it; returns the node it held before."""
        old, self.lock = self.lock, node
        self.kv -= moved
        return old

    def decode(self, now: float, dec_iter: int) -> None:
        """Prefill done: a fresh sequence samples its first token now; a recomputed one
        resumes where it was preempted. It decodes from iteration `dec_iter`."""
        if self.pending == 0:
            self.gen_base = 1
            self.first_token = now
            self.kv += 1
        else:
            self.gen_base = self.pending
            self.pending = 0
        self.state = DECODE
        self.iter_base = dec_iter

    def free(self) -> RadixNode | None:
        """Its KV is freed; the tree node it held (to release), if any."""
        lock, self.lock, self.kv = self.lock, None, 0
        return lock

    def preempt(self, generated: int) -> None:
        """Back to waiting, its `generated` tokens to prefill again."""
        self.state = WAITING
        self.pending = generated
        self.gen_base = generated
        self.need = self.prompt_len + self.pending + 1
        self.preemptions += 1

    def end(self) -> None:
        self.state = DONE

    # ------------------------------------------------------------------ reading

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
