"""`prefix_hit`: the share of the call's prompt each instance caches, in whole blocks
(llm-d/GIE's prefix-cache-scorer).

    score_i = ⌊cached_i / b⌋ / ⌈prompt / b⌉        ∈ [0, 1]

`cached_i`: the prompt tokens the router's view says i caches (`view.cached_tokens`), from
the prompt's start; `b` the block size (1: tokens). With `speculative: false` only the
blocks the view holds as confirmed count: on an instance whose engine publishes its
cache events (a precise view), the blocks the engine stored, not those the router only
believes are there because it sent a prompt there lately (`speculative_hit` scores those
on their own); elsewhere the router's estimate is all it has and counts as confirmed.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import Decision, Scorer


def block_hit(cached_tokens: int, prompt_tokens: int, block: int) -> float:
    """llm-d/GIE prefix-cache-scorer: matched whole blocks / the prompt's blocks."""
    total = -(-prompt_tokens // block)
    return (cached_tokens // block) / total if total else 0.0


class PrefixHit(Scorer):
    name = "prefix_hit"
    needs_prefix_index = True

    def __init__(self, block_size: Annotated[int, Help("tokens per block: only whole cached blocks count (llm-d: "
                                                       "64; 1: every token)")] = 1,
                 speculative: Annotated[bool, Help("count the blocks the view only believes cached (routed there, "
                                                   "unconfirmed by the engine's events) as hits too")] = True) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be ≥ 1, got {block_size}")
        self.block_size = block_size
        self.speculative = speculative

    def score(self, d: Decision) -> list[float]:
        cs, view, b = d.call, d.view, self.block_size
        cached = view.cached_tokens if self.speculative else view.confirmed_tokens
        return [block_hit(cached(cs, i), cs.input_tokens, b) for i in d.candidates]
