"""NVIDIA Dynamo's KV router as a dispatch policy (ai-dynamo/dynamo,
lib/llm/src/kv_router/scheduler.rs, `DefaultWorkerSelector`), temperature 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def dynamo_logit(prefill_tokens: float, active_blocks: float, block: int, overlap_weight: float) -> float:
    """Dynamo KV router: logit = overlap_score_weight · prefill_blocks + active (decode) blocks; lowest wins."""
    return overlap_weight * prefill_tokens / block + active_blocks


class DynamoKV(DispatchPolicy):
    """NVIDIA Dynamo's KV router (ai-dynamo/dynamo, lib/llm/src/kv_router/scheduler.rs,
    `DefaultWorkerSelector`; docs/router/kv_cache_routing.md), temperature 0:

    logit_i = overlap_score_weight · potential_prefill_blocks_i + potential_active_blocks_i,
    lowest wins. Prefill blocks: the prompt tokens waiting for prefill on i (its queued
    calls) plus this call's tokens not cached on i, over the block size; active blocks:
    the blocks of every call in flight on i plus this call's.
    """

    name = "dynamo_kv"
    shares_prefills = False  # the router dispatches every request at once
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
