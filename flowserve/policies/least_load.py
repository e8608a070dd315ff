"""Dispatch to the instance with the fewest outstanding predicted seconds of work."""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


class LeastLoad(DispatchPolicy):
    """Fewest outstanding predicted seconds of work (queued + running)."""

    name = "least_load"

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        return min(candidates, key=lambda i: i.outstanding)
