"""The routers platform teams deploy, as dispatch policies: SGLang's router, llm-d's
inference scheduler, NVIDIA Dynamo's KV router and power-of-two choices.

Each follows its project's public code and documentation (cited per class) with that
project's defaults. None of them knows a query's deadline or its remaining workflow:
they balance cache locality against load, call by call.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.base import Dispatch


def request_load(inst: InstanceState) -> int:
    """Requests the router has in flight on an instance (queued at it or running)."""
    return len(inst.running) + len(inst.queue)


# --------------------------------------------------------------------------- formulas


def sglang_imbalanced(max_load: int, min_load: int, abs_threshold: int, rel_threshold: float) -> bool:
    """sgl-router cache_aware: imbalanced iff (max − min) > abs_threshold and max > rel_threshold · min."""
    return max_load - min_load > abs_threshold and max_load > rel_threshold * min_load


def llmd_queue_score(queue: int, min_queue: int, max_queue: int) -> float:
    """llm-d/GIE queue-scorer: (max − q) / (max − min), 1 when every queue is equally long."""
    if max_queue == min_queue:
        return 1.0
    return (max_queue - queue) / (max_queue - min_queue)


def llmd_prefix_score(cached_tokens: int, prompt_tokens: int, block: int) -> float:
    """llm-d/GIE prefix-cache-scorer: matched whole blocks / the prompt's blocks."""
    total = -(-prompt_tokens // block)
    return (cached_tokens // block) / total if total else 0.0


def dynamo_logit(prefill_tokens: float, active_blocks: float, block: int, overlap_weight: float) -> float:
    """Dynamo KV router: logit = overlap_score_weight · prefill_blocks + active (decode) blocks; lowest wins."""
    return overlap_weight * prefill_tokens / block + active_blocks


# --------------------------------------------------------------------------- policies


class SglangCacheAware(Dispatch):
    """SGLang router's `cache_aware` policy (sgl-project/sglang, `sgl-router`
    src/policies/cache_aware.rs; defaults from `launch_router --help`).

    The router keeps an *approximate* prefix tree per worker of the requests it routed
    there (not what engines really cache: it never hears of evictions), trimmed LRU to
    `max_tree_tokens` per worker. With loads = requests in flight per worker, the system
    is imbalanced when max − min > `balance_abs_threshold` and max > `balance_rel_threshold`
    × min: then the shortest queue. Otherwise the worker with the longest matched prefix
    if it matches more than `cache_threshold` of the prompt, else the worker with the
    smallest tree (the most cache room). The prompt then joins the chosen worker's tree.
    """

    name = "sglang_cache_aware"

    def __init__(self, cache_threshold: float = 0.5, balance_abs_threshold: int = 32,
                 balance_rel_threshold: float = 1.0001, max_tree_tokens: int = 1 << 22) -> None:
        if not 0.0 <= cache_threshold <= 1.0:
            raise ValueError(f"cache_threshold must be in [0, 1], got {cache_threshold}")
        if balance_abs_threshold < 0 or balance_rel_threshold < 1.0:
            raise ValueError("balance_abs_threshold must be ≥ 0 and balance_rel_threshold ≥ 1")
        if max_tree_tokens < 1:
            raise ValueError(f"max_tree_tokens must be ≥ 1, got {max_tree_tokens}")
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.max_tree_tokens = max_tree_tokens
        self.tree = PrefixIndex(window_s=0.0)
        self.stats = {"cache": 0, "smallest_tree": 0, "shortest_queue": 0}

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        prompt = cs.call.prompt
        loads = [request_load(i) for i in candidates]
        if sglang_imbalanced(max(loads), min(loads), self.balance_abs_threshold, self.balance_rel_threshold):
            target = candidates[loads.index(min(loads))]
            self.stats["shortest_queue"] += 1
        else:
            _, per = self.tree.match_by_instance(prompt)
            holder = max(candidates, key=lambda i: per.get(i.name, 0))
            if per.get(holder.name, 0) / len(prompt) > self.cache_threshold:
                target = holder
                self.stats["cache"] += 1
            else:
                sizes = self.tree.cached_tokens
                target = min(candidates, key=lambda i: sizes.get(i.name, 0))
                self.stats["smallest_tree"] += 1
        self.tree.add(prompt, target.name, view.now, count=False)
        self._trim(target.name)
        return target

    def _trim(self, worker: str) -> None:
        """LRU-evict the worker's tree down to max_tree_tokens (sgl-router evicts periodically)."""
        tree = self.tree
        while tree.cached_tokens.get(worker, 0) > self.max_tree_tokens:
            node = next(tree.lru_nodes(worker), None)
            if node is None:
                return
            tree.discard(worker, tree.path_tokens(node), node.depth - len(node.key))


class LLMD(Dispatch):
    """llm-d inference scheduler (llm-d/llm-d-inference-scheduler on the Gateway API
    Inference Extension): filter → score → max-score-picker with the default profile of
    the llm-d "inference scheduling" guide: prefix-cache-scorer (weight 3),
    kv-cache-utilization-scorer (2), queue-scorer (2).

    prefix: matched whole blocks of `block_size` tokens over the prompt's blocks (the
    router's prefix index plays the KV-event-fed precise index); kv: 1 − KV utilisation
    (the engine's reported free KV, else the tokens of the calls in flight over the KV
    capacity); queue: the waiting queue's depth, min-max normalised. Ties (random in
    llm-d) go to the instance that was sent the fewest calls.
    """

    name = "llmd"
    needs_prefix_index = True
    prefix_window_s = 0.0

    def __init__(self, prefix_weight: float = 3.0, kv_weight: float = 2.0, queue_weight: float = 2.0,
                 block_size: int = 64) -> None:
        if min(prefix_weight, kv_weight, queue_weight) < 0:
            raise ValueError("scorer weights must be ≥ 0")
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        self.prefix_weight = prefix_weight
        self.kv_weight = kv_weight
        self.queue_weight = queue_weight
        self.block_size = block_size

    @staticmethod
    def kv_utilization(inst: InstanceState) -> float:
        cap = inst.kv_capacity
        if not cap:
            return 0.0
        if inst.spec.reports_capacity and inst.kv_free < cap:
            return min(1.0, max(0.0, 1.0 - inst.kv_free / cap))
        used = sum(c.input_tokens + c.predicted_output for c in inst.running.values())
        return min(1.0, used / cap)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        queues = [len(i.queue) for i in candidates]
        lo, hi = min(queues), max(queues)

        def key(inst: InstanceState) -> tuple[float, int]:
            score = (self.prefix_weight * llmd_prefix_score(view.cached_tokens(cs, inst), cs.input_tokens,
                                                            self.block_size)
                     + self.kv_weight * (1.0 - self.kv_utilization(inst))
                     + self.queue_weight * llmd_queue_score(len(inst.queue), lo, hi))
            return score, -inst.dispatched

        return max(candidates, key=key)  # the first of equal keys, as the scorer's strict `>`


class DynamoKV(Dispatch):
    """NVIDIA Dynamo's KV router (ai-dynamo/dynamo, lib/llm/src/kv_router/scheduler.rs,
    `DefaultWorkerSelector`; docs/router/kv_cache_routing.md), temperature 0:

    logit_i = overlap_score_weight · potential_prefill_blocks_i + potential_active_blocks_i,
    lowest wins. Prefill blocks: the prompt tokens waiting for prefill on i (its queued
    calls) plus this call's tokens not cached on i, over the block size; active blocks:
    the blocks of every call in flight on i plus this call's.
    """

    name = "dynamo_kv"
    needs_prefix_index = True
    prefix_window_s = 0.0

    def __init__(self, overlap_score_weight: float = 1.0, block_size: int = 16) -> None:
        if overlap_score_weight < 0:
            raise ValueError(f"overlap_score_weight must be ≥ 0, got {overlap_score_weight}")
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        self.overlap_score_weight = overlap_score_weight
        self.block_size = block_size

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        own_blocks = self._blocks(cs.input_tokens)

        def key(inst: InstanceState) -> tuple[float, int]:
            queued = [c.input_tokens for c in inst.queue]
            active = sum(map(self._blocks, queued)) + sum(self._blocks(c.input_tokens) for c in inst.running.values())
            prefill = sum(queued) + cs.input_tokens - view.cached_tokens(cs, inst)
            return dynamo_logit(prefill, active + own_blocks, self.block_size, self.overlap_score_weight), \
                inst.dispatched

        return min(candidates, key=key)


class PowerOfTwo(Dispatch):
    """Power of two choices (Mitzenmacher; sgl-router's `power_of_two` policy): sample
    two instances at random, send to the one with fewer requests in flight."""

    name = "power_of_two"

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        if len(candidates) == 1:
            return candidates[0]
        a, b = self._rng.sample(range(len(candidates)), 2)
        ia, ib = candidates[a], candidates[b]
        return ib if request_load(ib) < request_load(ia) else ia
