"""`top_k_random`: one of the `k` best candidates, uniformly at random (llm-d's random
picker over the top scores; spreads a hot prefix's traffic).

The k best by total score (ties as `max_score`: the fewest dispatched, then candidate
order); the draw comes from the picker's own generator, seeded by `seed` (no global
random state: a simulation is reproducible).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Picker


def top_k(scores: Sequence[float], dispatched: Sequence[int], k: int) -> list[int]:
    """Indices of the k highest scores (ties: the fewest dispatched, then the first)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], dispatched[i], i))
    return order[:k]


class TopKRandom(Picker):
    name = "top_k_random"

    def __init__(self, k: Annotated[int, Help("how many of the best candidates to draw from, ≥ 1")] = 2,
                 seed: Annotated[int, Help("the generator's seed")] = 0) -> None:
        if k < 1:
            raise ValueError(f"k must be ≥ 1, got {k}")
        self.k = k
        self._rng = random.Random(seed)

    def pick(self, scores: Sequence[float], d: Decision) -> InstanceState:
        cands = d.candidates
        best = top_k(scores, [i.dispatched for i in cands], self.k)
        return cands[best[self._rng.randrange(len(best))]]
