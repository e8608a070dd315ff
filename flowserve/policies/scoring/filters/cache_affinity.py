"""`cache_affinity`: the instances that cache the call's prompt best, unless they are too
busy (the rule of the `prefix_affinity` policy, as a filter).

    best = max_i hit_i;  pool = {i : hit_i ≥ (1 − near_tie) · best}     (when best ≥ min_match)
    keep_i = i ∈ pool,   unless min_{pool} finish > load_guard · min_{all} finish: then all

hit_i: the prompt tokens the router's view says i caches; finish_i: the call's expected
finish on i (`finish`, `wait_model`). A hot prefix so keeps its traffic on the instances
holding it until they finish the call more than `load_guard` × later than the best
alternative; the scorers choose within what is kept. Nothing cached anywhere (best <
`min_match`): every candidate is kept.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter
from flowserve.policies.scoring.scorers.finish import WaitModel, finishes


def affinity_pool(hits: list[int], finish: list[float], min_match: int, near_tie: float,
                  load_guard: float) -> list[bool]:
    """Which candidates the filter keeps (the module docstring), by index."""
    best = max(hits)
    if best < min_match:
        return [True] * len(hits)
    floor = best * (1.0 - near_tie)
    pool = [h >= floor for h in hits]
    if min(f for f, p in zip(finish, pool, strict=True) if p) > load_guard * min(finish):
        return [True] * len(hits)
    return pool


class CacheAffinity(Filter):
    name = "cache_affinity"
    needs_prefix_index = True

    def __init__(self, min_match: Annotated[int, Help("tokens an instance must cache for the prefix to count, "
                                                      "≥ 1")] = 16,
                 near_tie: Annotated[float, Help("hits within this fraction of the best one are kept too, in "
                                                 "[0, 1)")] = 0.1,
                 load_guard: Annotated[float, Help("keep everyone when the kept instances finish the call more "
                                                   "than this × later than the best one, ≥ 1")] = 2.0,
                 wait_model: Annotated[WaitModel, Help("how `finish` counts the work ahead (see `finish`)")]
                 = "batched") -> None:
        if min_match < 1:
            raise ValueError(f"min_match must be ≥ 1, got {min_match}")
        if not 0.0 <= near_tie < 1.0:
            raise ValueError(f"near_tie must be in [0, 1), got {near_tie}")
        if load_guard < 1.0:
            raise ValueError(f"load_guard must be ≥ 1, got {load_guard}")
        self.min_match, self.near_tie, self.load_guard = min_match, near_tie, load_guard
        self.wait_model: WaitModel = wait_model

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        def compute() -> dict[str, bool]:
            hits = [d.view.cached_tokens(d.call, i) for i in d.candidates]
            kept = affinity_pool(hits, finishes(d, self.wait_model), self.min_match, self.near_tie, self.load_guard)
            return {i.name: k for i, k in zip(d.candidates, kept, strict=True)}
        return d.once(("cache_affinity", self.min_match, self.near_tie, self.load_guard, self.wait_model),
                      compute)[inst.name]
