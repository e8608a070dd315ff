"""Prefix-affinity dispatch: send a call where its prompt's prefix is cached, unless that
instance is too busy.

A small, prefix-aware policy for serving (not Preble's E2, which lives elsewhere):

1. match the prompt in the router's prefix index; `hit_i` = tokens cached on instance i;
2. no instance caches at least `min_match` tokens → the least outstanding work (explore;
   ties go to the instance that was sent the fewest calls, spreading new prefixes);
3. otherwise the *affinity pool* is every instance whose hit is within `near_tie` (a
   fraction of the best hit) of the best one; pick its least outstanding instance `a`;
4. load guard: with `l` the candidate of least expected finish,
   finish_i = outstanding_i + t_call(i, uncached = prompt − hit_i), choose `l` instead
   of `a` when finish_a > load_guard × finish_l. A hot prefix so can make its instance
   at most `load_guard`× as late as the best alternative; the next call then finds the
   prefix on both and splits by load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def expected_finish(outstanding_s: float, call_s: float) -> float:
    """Work already promised to the instance (Hexgen t_queue, Eq. 3) plus this call's own time."""
    return outstanding_s + call_s


class PrefixAffinity(DispatchPolicy):
    name = "prefix_affinity"
    needs_prefix_index = True
    prefix_window_s = 0.0  # no request history is read: drop uncached nodes at once

    def __init__(self, min_match: Annotated[int, Help("tokens an instance must cache for the prefix to count, "
                                                      "≥ 1")] = 16,
                 near_tie: Annotated[float, Help("hits within this fraction of the best one join the affinity "
                                                 "pool, in [0, 1)")] = 0.1,
                 load_guard: Annotated[float, Help("the pool's pick may finish at most this × later than the "
                                                   "lightest instance, ≥ 1")] = 2.0) -> None:
        if min_match < 1:
            raise ValueError(f"min_match must be ≥ 1, got {min_match}")
        if not 0 <= near_tie < 1:
            raise ValueError(f"near_tie must be in [0, 1), got {near_tie}")
        if load_guard < 1:
            raise ValueError(f"load_guard must be ≥ 1, got {load_guard}")
        self.min_match = min_match
        self.near_tie = near_tie
        self.load_guard = load_guard

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        assert view.prefix_index is not None, "the core keeps the index for this policy"
        hits = {i.name: view.cached_tokens(cs, i) for i in candidates}
        best = max(hits.values())

        def finish(i: InstanceState) -> float:
            return expected_finish(i.outstanding, view.t_comp(cs, i))

        if best < self.min_match:  # explore; on an idle cluster spread new prefixes
            return min(candidates, key=lambda i: (i.outstanding, finish(i), i.dispatched))
        floor = best * (1.0 - self.near_tie)
        pool = [i for i in candidates if hits[i.name] >= floor]
        a = min(pool, key=lambda i: (i.outstanding, -hits[i.name]))
        lightest = min(candidates, key=finish)
        if finish(a) > self.load_guard * finish(lightest):
            return lightest
        return a
