"""`prefill_blocks`: the prefill each instance owes before and for the call, in KV blocks
(NVIDIA Dynamo's KV router, `potential_prefill_blocks`; ai-dynamo/dynamo
lib/llm/src/kv_router/scheduler.rs).

    x_i = (Σ prompt tokens queued at i + the call's prompt − what i caches of it) / b

A cost in blocks (unit `blocks`): its score is 1 − x_i / S, S the largest blocks cost of
the decision. With `active_blocks` (weight 1) and weight `overlap_score_weight` here, the
profile orders instances as Dynamo's logit, lowest first.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import CostScorer, Decision

BLOCK_HELP = "tokens per KV block (Dynamo: 16)"


def blocks(tokens: int, block: int) -> int:
    """Blocks holding `tokens` (the last one partly full)."""
    return -(-tokens // block)


class PrefillBlocks(CostScorer):
    name = "prefill_blocks"
    needs_prefix_index = True
    unit = "blocks"

    def __init__(self, block_size: Annotated[int, Help(BLOCK_HELP)] = 16) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        self.block_size = block_size

    def cost(self, d: Decision) -> list[float]:
        cs, view = d.call, d.view
        return [(sum(c.input_tokens for c in i.queue) + cs.input_tokens - view.cached_tokens(cs, i)) / self.block_size
                for i in d.candidates]
