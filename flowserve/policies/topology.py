"""Teola's topology-aware batching (Alg. 2, Teola §5.3) as a queue policy."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from flowserve.core.policy import QueuePolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def topology_key(item: CallState | Any) -> tuple[float, int, int, int]:
    """Teola Alg. 2 as one sort key: the bucket (the query, by its arrival), then the
    greatest depth to the graph's output first, then ready order."""
    qs = item.query
    return (qs.query.arrival, qs.query.id, -qs.run.depth(item.node.key), item.seq)


class Topology(QueuePolicy):
    """Teola Alg. 2 (topology-aware batching, Teola §5.3): waiting calls are bucketed by
    query, buckets ordered by their earliest arrival; inside a bucket the node with the
    greatest depth (longest path to the output: the critical path) goes first; buckets
    fill the free slots in that order. Non-LLM engine instances batch ops by the same
    key (`order_key`).

    Composition with `urgency`: topology orders *across* queries by arrival, urgency
    by deadline slack; to combine them, run `urgency` on LLM instances (deadlines
    across queries) and let the graph's depth order a query's own calls — which is
    what `topology` does inside a bucket — i.e. topology is the tie-break inside a
    query, urgency the order between queries. Depth is read when a call is queued.
    """

    name = "topology"
    uses_deadline = False
    order_key = staticmethod(topology_key)

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[float, int, int, int], int, CallState]] = []
        self._live: dict[int, CallState] = {}

    def push(self, cs: CallState) -> None:
        heapq.heappush(self._heap, (topology_key(cs), cs.id, cs))
        self._live[cs.id] = cs

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        heap = self._heap
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
        return heap[0][2] if heap else None

    def remove(self, cs: CallState, released: bool) -> None:
        del self._live[cs.id]

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[CallState]:
        return iter(list(self._live.values()))
