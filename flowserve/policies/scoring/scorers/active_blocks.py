"""`active_blocks`: the KV blocks each instance would hold with the call (NVIDIA Dynamo's
KV router, `potential_active_blocks`; ai-dynamo/dynamo lib/llm/src/kv_router/scheduler.rs).

    x_i = Σ over the calls queued at or running on i of ⌈prompt / b⌉ + ⌈the call's prompt / b⌉

A cost in blocks (unit `blocks`): its score is 1 − x_i / S, S the largest blocks cost of
the decision.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import CostScorer, Decision
from flowserve.policies.scoring.scorers.prefill_blocks import BLOCK_HELP, blocks


class ActiveBlocks(CostScorer):
    name = "active_blocks"
    unit = "blocks"

    def __init__(self, block_size: Annotated[int, Help(BLOCK_HELP)] = 16) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        self.block_size = block_size

    def cost(self, d: Decision) -> list[float]:
        b = self.block_size
        own = blocks(d.call.input_tokens, b)
        return [float(sum(blocks(c.input_tokens, b) for c in i.queue)
                      + sum(blocks(c.input_tokens, b) for c in i.running.values()) + own)
                for i in d.candidates]
