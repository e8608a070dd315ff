"""Preble's local queue (§4.3): prefix-hit priority groups."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import QueuePolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.policies.preble_costs import (
    group_quota,
    priority_group,
)


class PrefixGroups(QueuePolicy):
    """Preble §4.3: P groups by the prompt's cached fraction on this instance, visited
    high to low, group g releasing up to (g + 1)·10 calls per round; FCFS inside a group.

    The cached fraction is read from the router's prefix index when the call is pushed
    (before the core records the call's own prompt there), so the core keeps the index
    whenever this queue is configured, whatever the dispatch policy.
    """

    name = "prefix_groups"
    uses_deadline = False
    needs_prefix_index = True

    def __init__(self, groups: Annotated[int, Help("priority groups the waiting calls are split into by "
                                                   "cached share (Preble §4.3), ≥ 1")] = 10) -> None:
        if groups < 1:
            raise ValueError(f"groups must be ≥ 1, got {groups}")
        self.groups = groups
        # OrderedDicts: FCFS pops from the front, which plain dicts make slow over time
        self._q: list[OrderedDict[int, CallState]] = [OrderedDict() for _ in range(groups)]
        self._group: dict[int, int] = {}
        self._left = [group_quota(g) for g in range(groups)]
        self._view: ClusterView | None = None

    def bind(self, view: ClusterView) -> None:
        if view.prefix_index is None:
            raise ConfigError("queue policy 'prefix_groups' needs the router's prefix index "
                              "(the scheduler core keeps one when the queue policy asks for it)")
        self._view = view

    def group_of(self, cs: CallState) -> int:
        return self._group[cs.id]

    def push(self, cs: CallState) -> None:
        if self._view is None or self._view.prefix_index is None:
            raise ConfigError("queue policy 'prefix_groups' was not bound to a view with a prefix index")
        _, per = self._view.prefix_index.match_by_instance(cs.call.prompt)
        g = priority_group(per.get(cs.instance or "", 0), cs.call.input_tokens, self.groups)
        self._q[g][cs.id] = cs
        self._group[cs.id] = g

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        top = None
        for g in range(self.groups - 1, -1, -1):
            q = self._q[g]
            if q:
                if self._left[g] > 0:
                    return next(iter(q.values()))
                if top is None:
                    top = g
        if top is None:
            return None
        self._left = [group_quota(g) for g in range(self.groups)]  # every quota spent: new round
        return next(iter(self._q[top].values()))

    def remove(self, cs: CallState, released: bool) -> None:
        g = self._group.pop(cs.id)
        del self._q[g][cs.id]
        if released:
            self._left[g] -= 1

    def __len__(self) -> int:
        return len(self._group)

    def __iter__(self) -> Iterator[CallState]:
        for q in reversed(self._q):
            yield from q.values()
