"""The late-binding ready pool: calls that are ready but bound to no instance yet.

With a late-binding dispatch policy a ready call waits here until some instance has
room; then the pool hands over its first call that instance serves, and the dispatch
policy chooses among the instances with room. Order: higher query priority first, then
(when the queue policy is deadline-aware) the earlier query deadline, then ready order.
Pooled calls are nodes only, not token lists: 10⁵ waiting calls stay small.
"""

from __future__ import annotations

import heapq
import math

from flowserve.core.state import CallState, InstanceState


class ReadyPool:
    def __init__(self, by_deadline: bool = False) -> None:
        self._by_deadline = by_deadline
        self._heaps: dict[str | None, list[tuple[int, float, int, CallState]]] = {}
        self._live: set[int] = set()

    def __len__(self) -> int:
        return len(self._live)

    def push(self, cs: CallState) -> None:
        q = cs.query.query
        deadline = q.deadline if self._by_deadline and q.deadline is not None else math.inf
        model = cs.node.model.lower() if cs.node.model else None
        heapq.heappush(self._heaps.setdefault(model, []), (-q.priority, deadline, cs.seq, cs))
        self._live.add(cs.id)

    def discard(self, cs: CallState) -> None:
        self._live.discard(cs.id)  # its heap entry is skipped when it comes up

    def __contains__(self, cs: CallState) -> bool:
        return cs.id in self._live

    def pop_for(self, inst: InstanceState) -> CallState | None:
        """The first call `inst` can serve that it did not fail before, removed from the pool."""
        best: list | None = None
        for model in (*inst.names, None):
            heap = self._heaps.get(model)
            while heap and heap[0][3].id not in self._live:
                heapq.heappop(heap)
            if heap and (best is None or heap[0] < best[0]):
                best = heap
        if best is None:
            return None
        cs = heapq.heappop(best)[3]
        self._live.discard(cs.id)
        return cs
