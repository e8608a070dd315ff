"""First come, first served: the instance's arrival order (vLLM's default queue)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from flowserve.core.policy import QueuePolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


class FCFS(QueuePolicy):
    """Arrival order at the instance (vLLM's default)."""

    name = "fcfs"
    uses_deadline = False

    def __init__(self) -> None:
        self._q: OrderedDict[int, CallState] = OrderedDict()

    def push(self, cs: CallState) -> None:
        self._q[cs.id] = cs

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        return next(iter(self._q.values()), None)

    def remove(self, cs: CallState, released: bool) -> None:
        del self._q[cs.id]

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[CallState]:
        return iter(self._q.values())
