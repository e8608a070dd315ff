"""The planner's cost model: what an engine does with a send order of calls, iteration by
iteration, at the granularity of prompt parts (the instruction, each field, the output
instruction) — the prefix-sharing rules of the simulated engine (`flowserve.sim.engine`):

* continuous batching: at each iteration's start calls are admitted in send order while
  a slot is free (`max_num_seqs`) and the prefill backlog is under the iteration's token
  budget (chunked prefill, oldest first);
* a call's cached prefix is what the cache holds *when it is admitted*: calls of one
  prefix group admitted in one iteration each compute the shared prefix (vLLM); a
  prompt lands in the cache when its prefill completes;
* a waiting call that shares at least its cached prefix plus one token budget with a call
  in prefill waits for it instead of computing it twice (SGLang's in-batch prefix
  caching, as `SimEngine._computing`);
* a call that names another (`after`: a prefix warm-up, or later a group leader that the
  scheduler releases first) is released once that call's prefill completed;
* the cache holds the KV capacity minus the running calls' own tokens, least recently
  used parts evicted first; each instance of the cluster has its own cache and takes
  every n-th call (late binding, round robin), a call that waits for another on that
  call's instance.

Time is the sum of the iterations' times from the instance's cost model (the longest
instance); the hit count is exact for this model, not an ideal unbounded cache.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.instance import kv_capacity, roofline_for
from flowserve.sql.estimate import token_hit_rate
from flowserve.types.specs import InstanceSpec

Parts = tuple[tuple[str, int], ...]  # (part key, tokens) in layout order
PAPER_CLUSTER = (InstanceSpec("l4", "L4", "llama-3.1-8b"),)  # Llama-3-8B on one L4, as the paper


@dataclass(frozen=True, slots=True)
class Call:
    """What the model needs of one planned call."""

    parts: Parts
    output_tokens: int
    after: int | None = None  # the call (index in the send order) whose prefill it waits for

    @property
    def tokens(self) -> int:
        return sum(t for _, t in self.parts)


@dataclass(frozen=True, slots=True)
class EngineShape:
    """What the model needs of the cluster (one engine configuration, n instances)."""

    instances: int
    max_num_seqs: int
    token_budget: int
    kv_tokens: int
    cost: CostModel
    # llama-server without a RAM prompt cache (`--cache-ram 0`): each of its max_num_seqs
    # slots keeps only the prompt it served last; the slot choice's similarity threshold
    slot_similarity: float | None = None


def engine_shape(cluster: Sequence[InstanceSpec] | None) -> EngineShape:
    """The shape of a cluster (its first instance's engine, times the instances); an
    unknown cluster (a gateway's) is modelled as the paper's."""
    cluster = cluster or PAPER_CLUSTER
    spec = cluster[0]
    kv = kv_capacity(spec) if spec.engine.prefix_caching else 0
    slots = spec.profile.slot_config if spec.profile is not None else None
    if slots is not None and slots.cache_ram_tokens:  # a RAM cache keeps saved prompts: a shared cache
        kv = max(kv, slots.cache_ram_tokens)
    similarity = slots.similarity if slots is not None and slots.cache_ram_tokens == 0 else None
    return EngineShape(len(cluster), spec.engine.max_num_seqs, spec.engine.token_budget, kv, roofline_for(spec),
                       similarity)


@dataclass(frozen=True, slots=True)
class SendEstimate:
    calls: int
    prompt_tokens: int
    hit_tokens: int
    time_s: float

    @property
    def hit_rate(self) -> float:
        return token_hit_rate(self.hit_tokens, self.prompt_tokens)


def estimate_send(calls: Sequence[Call], shape: EngineShape) -> SendEstimate:
    """Estimated hit tokens and time of `calls` sent in this order to the cluster."""
    share: list[list[int]] = [[] for _ in range(shape.instances)]
    home: list[int] = []
    for k, c in enumerate(calls):
        home.append(home[c.after] if c.after is not None else k % shape.instances)
        share[home[k]].append(k)
    tokens = [c.tokens for c in calls]
    hits = 0
    time_s = 0.0
    for idx in share:
        h, t = _EngineLoad(shape, calls, tokens).run(idx)
        hits += h
        time_s = max(time_s, t)
    return SendEstimate(len(calls), sum(tokens), hits, time_s)


class _EngineLoad:
    def __init__(self, shape: EngineShape, calls: Sequence[Call], tokens: Sequence[int]) -> None:
        self.s = shape
        self.calls = calls
        self.tokens = tokens
        self.node: dict[tuple[int, str], int] = {}  # (parent node, part key) → node id (0 = root)
        self.cache: OrderedDict[int, int] = OrderedDict()  # cached node → its tokens, LRU first
        self.cached_tokens = 0

    def path(self, k: int) -> list[tuple[int, int]]:
        """The call's prefix nodes with their tokens."""
        out, parent = [], 0
        for key, toks in self.calls[k].parts:
            nid = self.node.get((parent, key))
            if nid is None:
                nid = self.node[(parent, key)] = len(self.node) + 1
            out.append((nid, toks))
            parent = nid
        return out

    def match(self, path: list[tuple[int, int]], tokens: int) -> int:
        hit = 0
        for nid, toks in path:
            if nid not in self.cache:
                break
            self.cache.move_to_end(nid)
            hit += toks
        return min(hit, max(0, tokens - 1))  # the last token is always computed

    def commit(self, path: list[tuple[int, int]], room: int) -> None:
        for nid, toks in path:
            if nid in self.cache:
                self.cache.move_to_end(nid)
            else:
                self.cache[nid] = toks
                self.cached_tokens += toks
        while self.cache and self.cached_tokens > room:
            _, toks = self.cache.popitem(last=False)
            self.cached_tokens -= toks

    def run(self, order: list[int]) -> tuple[int, float]:
        s, calls = self.s, self.calls
        members = set(order)
        waiting_on: dict[int, list[int]] = {}
        ready: list[int] = []
        for k in order:
            a = calls[k].after
            if a is not None and a in members:
                waiting_on.setdefault(a, []).append(k)
            else:
                ready.append(k)
        heapq.heapify(ready)
        paths: dict[int, list[tuple[int, int]]] = {}
        prefilling: list[list[int]] = []  # [call, tokens left, tokens done, uncached tokens, slot]
        decoding: list[tuple[int, int, int, int]] = []  # (last iteration, call, context, slot)
        dec_ctx = private = hits = it = backlog = 0
        t = 0.0
        tokens = self.tokens
        slots = None if s.slot_similarity is None else _Slots(s.max_num_seqs, s.slot_similarity)
        while ready or prefilling or decoding:
            budget = s.token_budget - len(decoding)
            # llama-server hands a request to an idle slot at once; vLLM/SGLang admit under the budget
            while ready and len(prefilling) + len(decoding) < s.max_num_seqs \
                    and (slots is not None or backlog < budget):
                k = ready[0]
                path = paths.get(k) or paths.setdefault(k, self.path(k))
                slot = -1
                if slots is not None:
                    slot, cached = slots.take(path, tokens[k], it)
                else:
                    cached = self.match(path, tokens[k]) if s.kv_tokens else 0
                    if self._computing(path, tokens[k], cached, prefilling, paths):
                        break
                heapq.heappop(ready)
                hits += cached
                left = tokens[k] - cached
                private += left
                backlog += left
                prefilling.append([k, left, cached, left, slot])
            if not prefilling and not decoding:
                break  # only calls waiting on a call of another instance (not modelled): stop
            take = budget
            chunk = attended = 0.0
            done: list[list[int]] = []
            for p in prefilling:
                if take <= 0:
                    break
                n = min(take, p[1])
                attended += n * p[2] + n * (n + 1) / 2
                p[1] -= n
                p[2] += n
                chunk += n
                take -= n
                backlog -= n
                if p[1] == 0:
                    done.append(p)
            t += s.cost.iteration_time(int(chunk), attended, len(decoding), dec_ctx)
            it += 1
            while decoding and decoding[0][0] <= it:
                _, k, ctx, slot = heapq.heappop(decoding)
                dec_ctx -= ctx
                private -= calls[k].output_tokens
                if slots is not None:
                    slots.release(slot, paths.pop(k), it)
            if done:
                prefilling = [p for p in prefilling if p[1] > 0]
            for k, _, _, uncached, slot in done:
                private -= uncached  # the prompt now lives in the cache
                if s.kv_tokens and slots is None:
                    self.commit(paths[k], s.kv_tokens - private)
                private += calls[k].output_tokens
                if calls[k].output_tokens > 1:  # the last prefill iteration sampled token 1
                    ctx = tokens[k] + calls[k].output_tokens // 2
                    heapq.heappush(decoding, (it + calls[k].output_tokens - 1, k, ctx, slot))
                    dec_ctx += ctx
                else:
                    private -= calls[k].output_tokens
                    if slots is not None:
                        slots.release(slot, paths[k], it)
                for f in waiting_on.pop(k, ()):
                    heapq.heappush(ready, f)
                if slots is None or calls[k].output_tokens <= 1:
                    paths.pop(k, None)
        return hits, t

    def _computing(self, path: list[tuple[int, int]], tokens: int, cached: int, prefilling: list[list[int]],
                   paths: dict[int, list[tuple[int, int]]]) -> bool:
        need = cached + self.s.token_budget
        if not prefilling or tokens < need:
            return False
        for p in prefilling:
            shared = 0
            for (a, toks), (b, _) in zip(path, paths[p[0]], strict=False):
                if a != b:
                    break
                shared += toks
            if shared >= need:
                return True
        return False


class _Slots:
    """llama-server's slots without a RAM prompt cache (`flowserve/sim/slots.py`): each keeps
    the prompt it served last; a call takes the idle slot whose kept prompt covers the
    largest fraction of it above the similarity threshold, else the least recently used
    one, and reuses only that slot's common prefix."""

    def __init__(self, n: int, similarity: float) -> None:
        self.similarity = similarity
        self.kept: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.used = [-1] * n
        self.busy = [False] * n

    @staticmethod
    def common(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
        shared = 0
        for (x, toks), (y, _) in zip(a, b, strict=False):
            if x != y:
                break
            shared += toks
        return shared

    def take(self, path: list[tuple[int, int]], tokens: int, now: int) -> tuple[int, int]:
        """(slot, cached tokens) of a call admitted now."""
        idle = [i for i, b in enumerate(self.busy) if not b]
        best, best_lcp = None, 0
        for i in idle:
            lcp = self.common(self.kept[i], path)
            if lcp > best_lcp and lcp / max(1, tokens) > self.similarity:
                best, best_lcp = i, lcp
        if best is None:  # the least recently used, the last of equals (llama-server's choice)
            best = idle[0]
            for i in idle:
                if self.used[i] <= self.used[best]:
                    best = i
            best_lcp = self.common(self.kept[best], path)
        self.busy[best] = True
        return best, min(best_lcp, max(0, tokens - 1))

    def release(self, slot: int, path: list[tuple[int, int]], now: int) -> None:
        self.busy[slot] = False
        self.kept[slot] = path
        self.used[slot] = now
