"""Power of two choices (Mitzenmacher; sgl-router's `power_of_two` policy) as a dispatch policy.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.sglang import request_load


class PowerOfTwo(DispatchPolicy):
    """Power of two choices (Mitzenmacher; sgl-router's `power_of_two` policy): sample
    two instances at random, send to the one with fewer requests in flight."""

    name = "power_of_two"
    shares_prefills = False  # the router dispatches every request at once

    def __init__(self, seed: Annotated[int, Help("the seed of the policy's own generator")] = 0) -> None:
        self._rng = random.Random(seed)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        if len(candidates) == 1:
            return candidates[0]
        a, b = self._rng.sample(range(len(candidates)), 2)
        ia, ib = candidates[a], candidates[b]
        return ib if request_load(ib) < request_load(ia) else ia
