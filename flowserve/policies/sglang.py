"""SGLang router's `cache_aware` policy as a dispatch policy (sgl-project/sglang, `sgl-router`
src/policies/cache_aware.rs), with its defaults. It knows no deadline or workflow: it
balances cache locality against load, call by call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def request_load(inst: InstanceState) -> int:
    """Requests the router has in flight on an instance (queued at it or running)."""
    return len(inst.running) + len(inst.queue)


def sglang_imbalanced(max_load: int, min_load: int, abs_threshold: int, rel_threshold: float) -> bool:
    """sgl-router cache_aware: imbalanced iff (max − min) > abs_threshold and max > rel_threshold · min."""
    return max_load - min_load > abs_threshold and max_load > rel_threshold * min_load


class SglangCacheAware(DispatchPolicy):
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
    shares_prefills = False  # the router dispatches every request at once

    def __init__(self, cache_threshold: Annotated[float, Help("the longest match goes to its worker when it "
                                                              "covers more than this share of the prompt")] = 0.5,
                 balance_abs_threshold: Annotated[int, Help("imbalanced when max − min requests in flight "
                                                            "exceed this ...")] = 32,
                 balance_rel_threshold: Annotated[float, Help("... and max exceeds this × min (≥ 1)")] = 1.0001,
                 max_tree_tokens: Annotated[int, Help("each worker's approximate tree is LRU-trimmed to this "
                                                      "many tokens")] = 1 << 22) -> None:
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
