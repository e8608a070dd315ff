"""A simulated vLLM/SGLang-like engine instance, advanced in closed form.

Behaviour modelled:
* continuous batching: up to `max_num_seqs` running sequences; each iteration decodes
  one token for every decoding sequence and spends the rest of the token budget on
  prefill chunks, oldest admission first (chunked prefill);
* paged KV memory of `capacity` tokens (GPU memory minus weights); a radix-tree prefix
  cache whose unreferenced blocks are evicted LRU when memory is needed;
* preemption by recompute (newest sequence first) when decode growth runs out of KV.

Between two events the batch composition is fixed, so the engine plans a *stretch* of k
identical iterations: up to the first prefill completion, decode completion or KV
exhaustion. Iteration time is evaluated at the stretch's mid-point context (exact while
the cost is linear in context). A submit cuts the running stretch at the end of the
iteration in progress, where vLLM would admit the new request. The number of stretches
grows with the number of calls, not with tokens.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from flowserve.cache.radix import RadixNode, RadixTree
from flowserve.errors import FailureKind
from flowserve.profiles.cost_model import CostModel
from flowserve.sim.marks import OutputMarks
from flowserve.sim.sequence import DECODE, PREFILL, WAITING, Capacity, Seq
from flowserve.sim.stretch import attended_tokens, prefill_portions
from flowserve.types.events import CallFailed, CallFinished, CallProgress, PrefillDone, PrefixEvicted
from flowserve.types.specs import EngineParams
from flowserve.types.work import LLMCall


class SimEngine:
    def __init__(self, name: str, params: EngineParams, cost: CostModel, kv_capacity: int,
                 report_evictions: bool = False, report_prefill: bool = False) -> None:
        """report_prefill: a PrefillDone per call whose prefill completes (the core shares prefills)."""
        assert params.token_budget > 0 and params.max_num_seqs > 0
        self.name = name
        self.p = params
        self.cost = cost
        self.capacity_tokens = kv_capacity - kv_capacity % params.block_size
        self.tree = RadixTree() if params.prefix_caching else None
        self.report_evictions = report_evictions
        self.report_prefill = report_prefill
        self.waiting: deque[Seq] = deque()
        self.prefilling: list[Seq] = []  # admission order
        self.decoding: dict[int, Seq] = {}
        self._finish_heap: list[tuple[int, int, Seq]] = []
        self.seqs: dict[int, Seq] = {}
        self._order = itertools.count()
        self.private = 0  # KV tokens held outside the tree (uncached prompts + outputs)
        self.dec_iter = 0  # decode iterations so far (each adds a token to every decoder)
        self.dec_ctx = 0  # Σ context of decoding sequences
        # Current stretch: k iterations of dt seconds from t0, prefill portions per iteration.
        self.t0 = 0.0
        self.k = 0
        self.dt = 0.0
        self._portions: list[tuple[Seq, int]] = []
        self.version = 0  # bumps whenever the wake-up time changes
        self.busy_time = 0.0
        self.stats = {"prefilled": 0, "cached": 0, "preemptions": 0, "evicted": 0}
        self._events: list[CallFinished | CallFailed | PrefixEvicted | CallProgress | PrefillDone] = []
        self.marks = OutputMarks(name)  # parts of outputs released at their last token
        self._now = 0.0
        # Per-request latency outside the engine's iterations (a fitted profile's
        # request_overhead_s): completions reach the caller that much later.
        self.overhead = float(cost.request_overhead_s)
        self._delayed: list[tuple[float, int, CallFinished]] = []

    # ------------------------------------------------------------------ interface

    @property
    def wake(self) -> float | None:
        """Next time the engine must be advanced: its stretch's end or a delayed delivery."""
        end = self.t0 + self.k * self.dt if self.k else None
        if self._delayed and (end is None or self._delayed[0][0] < end):
            return self._delayed[0][0]
        return end

    def submit(self, call: LLMCall, now: float, output_tokens: int | None = None, marks: tuple[int, ...] = ()
               ) -> list[CallFinished | CallFailed | PrefixEvicted]:
        """Start a call that produces `output_tokens` tokens (the oracle's truth; without one,
        the predicted length), at most its max_tokens; a CallProgress at each of `marks`."""
        self._now = now
        self.marks.add(call.id, marks)
        target = min(call.predicted_output if output_tokens is None else output_tokens,
                     max(1, self.capacity_tokens - call.input_tokens))  # vLLM stops at max_model_len
        seq = Seq(call, next(self._order), target)
        seq.estimate(seq.prompt_len - self._match(seq, now) + 1)
        if seq.prompt_len + 1 > self.capacity_tokens:
            return [CallFailed(now, call.id, self.name,
                               f"prompt of {seq.prompt_len} tokens exceeds the KV capacity of "
                               f"{self.capacity_tokens} tokens on {self.name}", True, FailureKind.CONTEXT_OVERFLOW)]
        self.seqs[call.id] = seq
        self.waiting.append(seq)
        self._kick(now)
        return self._drain()

    def abort(self, call_id: int, now: float) -> None:
        self._now = now
        seq = self.seqs.pop(call_id, None)
        self.marks.drop(call_id)
        if seq is None:
            return
        if seq.state == WAITING:
            self.waiting.remove(seq)
        else:
            self._free(seq)
            if seq.state == PREFILL:
                self.prefilling.remove(seq)
                self._portions = [(s, n) for s, n in self._portions if s is not seq]
            else:
                self._leave_decode(seq)
        seq.end()
        self._kick(now)

    def advance(self, now: float) -> list[CallFinished | CallFailed | PrefixEvicted]:
        """At a wake-up (now == wake): complete the stretch ending now and plan the next
        one, and hand over completions whose delivery is due."""
        wake = self.wake
        assert wake is not None and abs(now - wake) < 1e-9, (now, wake)
        self._now = now
        if self.k and now >= self.t0 + self.k * self.dt - 1e-9:
            self._apply(self.k, now)
            self.k = 0
            self._admit(now)
            self._plan(now)
        while self._delayed and self._delayed[0][0] <= now + 1e-9:
            self._events.append(heapq.heappop(self._delayed)[2])
            self.version += 1
        return self._drain()

    def capacity(self) -> Capacity:
        n_running = len(self.prefilling) + len(self.decoding)
        waiting_need = sum(s.need for s in self.waiting)
        backlog = sum(s.prefill_left for s in self.prefilling) + waiting_need
        evictable = self.tree.evictable_size if self.tree is not None else 0
        return Capacity(
            free_seqs=self.p.max_num_seqs - n_running - len(self.waiting),
            headroom_tokens=self.p.token_budget - len(self.decoding) - backlog,
            kv_free_tokens=self.capacity_tokens - self.used + evictable - waiting_need,
        )

    @property
    def used(self) -> int:
        return self.private + (self.tree.size if self.tree is not None else 0)

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.prefilling or self.decoding)

    # ------------------------------------------------------------------ stretches

    def _kick(self, now: float) -> None:
        """Something changed at `now`: start if idle, else end the stretch at the close
        of the iteration in progress."""
        if self.k == 0 or now <= self.t0:
            # idle, or the stretch was planned at this very instant: plan afresh
            self.busy_time -= self.k * self.dt
            self.k = 0
            self._admit(now)
            self._plan(now)
            return
        i = int((now - self.t0) / self.dt) if self.dt > 0 else 0
        k = min(self.k, i + 1)
        if k != self.k:
            self.busy_time -= (self.k - k) * self.dt
            self.k = k
            self.version += 1

    def _plan(self, now: float) -> None:
        self._ensure_decode_room(now)
        n_dec = len(self.decoding)
        if not self.prefilling and not n_dec:
            self.k = 0
            self.version += 1
            return
        portions, k = prefill_portions(self.prefilling, self.p.token_budget - n_dec)
        if n_dec:
            k = min(k, self._finish_heap[0][0] - self.dec_iter, self.marks.next_due(self.dec_iter))
            # decode growth needs n_dec tokens per iteration: free cache for the stretch
            # now (LRU order, as vLLM would over its iterations), else end it early
            self._reserve(n_dec * k, now)
            free = self.capacity_tokens - self.used
            assert free >= n_dec, "decode room was ensured before planning"
            k = min(k, free // n_dec)
        k = max(1, k)
        # iteration time at the stretch's mid-point
        prefill_tokens = sum(n for _, n in portions)
        attended = attended_tokens(portions, k)
        ctx = self.dec_ctx + n_dec * (k - 1) / 2
        dt = self.cost.iteration_time(prefill_tokens, attended, n_dec, ctx)
        assert dt > 0
        self.t0, self.k, self.dt, self._portions = now, k, dt, portions
        self.busy_time += k * dt
        self.version += 1

    def _apply(self, k: int, now: float) -> None:
        """Apply k iterations of the current stretch; finish what completes at `now`."""
        n_dec = len(self.decoding)
        self.dec_iter += k
        self.dec_ctx += n_dec * k
        self.private += n_dec * k
        completed_prefill = []
        for s, n in self._portions:
            left = s.prefill(n * k)
            self.stats["prefilled"] += n * k
            assert left >= 0
            if left == 0:
                completed_prefill.append(s)
        for s in completed_prefill:
            self.prefilling.remove(s)
            self._finish_prefill(s, now)
        self._events.extend(self.marks.due(self.dec_iter, now))
        heap = self._finish_heap
        while heap and heap[0][0] <= self.dec_iter:
            _, _, s = heapq.heappop(heap)
            if s.state == DECODE and s.iter_base + (s.target - s.gen_base) <= self.dec_iter:
                self._complete(s, now)

    def _finish_prefill(self, s: Seq, now: float) -> None:
        if self.tree is not None:
            start = s.matched[1] if s.matched is not None and s.matched[0] == self.tree.version else None
            node, _ = self.tree.insert(s.call.prompt, now, start)
            self.tree.acquire(node)
            # the prompt now lives in the tree (a copy another sequence inserted first
            # is simply dropped); recomputed output tokens stay private
            moved = s.prompt_len - s.cached
            old = s.cache(node, moved)
            if old is not None:
                self.tree.release(old)
            self.private -= moved
        fresh = s.pending == 0  # a fresh sequence: the last prefill iteration samples token 1
        s.decode(now, self.dec_iter)
        if fresh:
            self.private += 1
            if self.report_prefill:
                self._events.append(PrefillDone(now, s.call.id, self.name))
        if s.gen_base >= s.target:
            self._complete(s, now, decoding=False)
            return
        self._events.extend(self.marks.start(s, now))
        self.decoding[s.call.id] = s
        self.dec_ctx += s.prompt_len + s.gen_base
        heapq.heappush(self._finish_heap, (s.iter_base + s.target - s.gen_base, s.order, s))

    def _leave_decode(self, s: Seq) -> None:
        del self.decoding[s.call.id]
        self.dec_ctx -= s.prompt_len + s.generated(self.dec_iter)

    def _complete(self, s: Seq, now: float, decoding: bool = True) -> None:
        out = s.generated(self.dec_iter)
        self._events.extend(self.marks.finish(s.call.id, out, now))
        if decoding:
            self._leave_decode(s)
        self._free(s)
        s.end()
        del self.seqs[s.call.id]
        if self.overhead > 0:
            first = None if s.first_token is None else s.first_token + self.overhead
            heapq.heappush(self._delayed, (now + self.overhead, s.order, CallFinished(
                now + self.overhead, s.call.id, self.name, output_tokens=out, cached_tokens=s.cached,
                started=s.started, first_token=first, preemptions=s.preemptions)))
            self.version += 1
            return
        self._events.append(CallFinished(
            now, s.call.id, self.name, output_tokens=out, cached_tokens=s.cached,
            started=s.started, first_token=s.first_token, preemptions=s.preemptions))

    def _free(self, s: Seq) -> None:
        self.private -= s.kv_now(self.dec_iter)
        lock = s.free()
        if lock is not None and self.tree is not None:
            self.tree.release(lock)

    # ------------------------------------------------------------------ admission

    def _match(self, s: Seq, now: float) -> int:
        """Cached prompt tokens; the match is kept until the tree changes shape, so the
        admission right after a submit does not walk the tree again."""
        if self.tree is None:
            return 0
        if s.matched is None or s.matched[0] != self.tree.version:
            s.match(self.tree.version, self.tree.match(s.call.prompt, now))
        return min(s.matched[1].depth, s.prompt_len - 1)

    def _admit(self, now: float) -> None:
        self._ensure_decode_room(now)
        budget = self.p.token_budget - len(self.decoding)
        while self.waiting:
            if len(self.prefilling) + len(self.decoding) >= self.p.max_num_seqs:
                break
            backlog = sum(s.prefill_left for s in self.prefilling)
            if backlog >= budget and (self.prefilling or self.decoding):
                break
            s = self.waiting[0]
            cached, node = 0, None
            if self.tree is not None:
                cached = self._match(s, now)
                node = s.matched[1] if s.matched is not None else None
                if self._computing(s, cached):
                    break
            uncached = s.prompt_len - cached + s.pending
            # room for its prompt and first token, and for the decoders' next tokens
            if not self._reserve(uncached + 1 + len(self.decoding), now, keep=node):
                break
            self.waiting.popleft()
            lock = None
            if node is not None and node.depth:
                self.tree.acquire(node)
                lock = node
            s.admit(cached, uncached, uncached, now, lock)
            self.private += uncached
            self.stats["cached"] += cached
            self.prefilling.append(s)

    def _computing(self, s: Seq, cached: int) -> bool:
        """Whether a sequence in prefill is computing at least a chunk more of `s`'s prompt
        than the cache holds: then `s` waits for it to land in the cache instead of
        computing it twice (SGLang's in-batch prefix caching does the same)."""
        prompt = s.call.prompt
        need = cached + self.p.token_budget  # a shared prefix this long makes waiting pay
        if not self.prefilling or len(prompt) < need:
            return False
        head = prompt[:need]
        return any(p.pending == 0 and p.call.prompt[:need] == head for p in self.prefilling)

    def _reserve(self, tokens: int, now: float, keep: RadixNode | None = None) -> bool:
        """Make `tokens` of KV free, evicting unreferenced cache if needed."""
        short = tokens - (self.capacity_tokens - self.used)
        if short <= 0:
            return True
        if self.tree is None:
            return False
        if keep is not None and keep.depth:
            self.tree.acquire(keep)  # do not evict the prefix we are about to use
        freed = self.tree.evict(short, self._on_evict if self.report_evictions else None)
        if keep is not None and keep.depth:
            self.tree.release(keep)
        self.stats["evicted"] += freed
        return freed >= short

    def _on_evict(self, node: RadixNode) -> None:
        assert self.tree is not None
        start = node.depth - len(node.key)
        self._events.append(PrefixEvicted(self._now, self.name, self.tree.path_tokens(node), start))

    def _ensure_decode_room(self, now: float) -> None:
        """Before an iteration every decoder needs one more KV slot: evict cache, then
        preempt the newest sequences (recompute) until it fits."""
        while self.decoding or self.prefilling:
            need = len(self.decoding)
            if self._reserve(need, now):
                return
            victim = max(itertools.chain(self.decoding.values(), self.prefilling),
                         key=lambda s: s.order)
            self._preempt(victim)

    def _preempt(self, s: Seq) -> None:
        gen = s.generated(self.dec_iter)
        self._free(s)
        if s.state == DECODE:
            self._leave_decode(s)
        else:
            self.prefilling.remove(s)
        s.preempt(gen)
        self.stats["preemptions"] += 1
        self.waiting.appendleft(s)

    def _drain(self) -> list[CallFinished | CallFailed | PrefixEvicted | CallProgress | PrefillDone]:
        events, self._events = self._events, []
        return events

