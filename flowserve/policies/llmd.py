"""llm-d's inference scheduler as a dispatch policy (llm-d/llm-d-inference-scheduler on the
Gateway API Inference Extension), with the "inference scheduling" guide's default profile.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def llmd_queue_score(queue: int, min_queue: int, max_queue: int) -> float:
    """llm-d/GIE queue-scorer: (max − q) / (max − min), 1 when every queue is equally long."""
    if max_queue == min_queue:
        return 1.0
    return (max_queue - queue) / (max_queue - min_queue)


def llmd_prefix_score(cached_tokens: int, prompt_tokens: int, block: int) -> float:
    """llm-d/GIE prefix-cache-scorer: matched whole blocks / the prompt's blocks."""
    total = -(-prompt_tokens // block)
    return (cached_tokens // block) / total if total else 0.0


class LLMD(DispatchPolicy):
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
    shares_prefills = False  # the router dispatches every request at once
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
