"""The papers' baseline dispatch: a round-robin balancer in front of data-parallel engines."""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


class RoundRobin(DispatchPolicy):
    """The papers' baseline: a round-robin balancer in front of data-parallel engines."""

    name = "round_robin"

    def __init__(self) -> None:
        self._next: dict[tuple[str, ...], int] = {}

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        group = tuple(i.name for i in candidates)
        k = self._next.get(group, 0)
        self._next[group] = k + 1
        return candidates[k % len(candidates)]
