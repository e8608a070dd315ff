"""`speculative_hit`: the share of the call's prompt the router only believes each instance
caches — blocks it routed there lately that the engine has not confirmed — in whole blocks.

    score_i = ⌊speculative_i / b⌋ / ⌈prompt / b⌉        ∈ [0, 1]

speculative_i: the prompt's blocks past those i's engine confirmed (its cache events) that
a prompt routed to i within `ttl_s` covered (`view.cache_split`); an entry also lapses at
the core's own TTL (`kv.speculative_ttl_s`) unless its call still waits or runs there.
0 where the view is not precise (the estimate counts as confirmed: `prefix_hit`). With
its own weight a profile trusts a believed prefix less than a confirmed one.
"""

from __future__ import annotations

import math
from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import Decision, Scorer
from flowserve.policies.scoring.scorers.prefix_hit import block_hit


class SpeculativeHit(Scorer):
    name = "speculative_hit"
    needs_prefix_index = True

    def __init__(self, block_size: Annotated[int, Help("tokens per block: only whole blocks count (1: every "
                                                       "token)")] = 1,
                 ttl_s: Annotated[float, Help("a routed prompt counts this long after it was routed (or renewed), "
                                              "seconds; at most the core's own TTL applies")] = math.inf) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        self.block_size = block_size
        self.ttl_s = ttl_s

    def score(self, d: Decision) -> list[float]:
        cs, view, b = d.call, d.view, self.block_size
        return [block_hit(view.cache_split(cs, i, self.ttl_s)[1], cs.input_tokens, b) for i in d.candidates]
