"""Policies as a researcher writes them in their own package (named by import path in the
tests: `thirdparty:LongestPrompt`), and ones that break the contract."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from flowserve import CallState, ClusterView, DispatchPolicy, InstanceState, QueuePolicy


class FewestCalls(DispatchPolicy):
    """The instance with the fewest calls queued and running."""

    def __init__(self, spread: int = 0) -> None:
        if spread < 0:
            raise ValueError(f"spread must be ≥ 0, got {spread}")
        self.spread = spread

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        return min(candidates, key=lambda i: (len(i.running) + len(i.queue), i.name))


class NoChoose(DispatchPolicy):
    """Forgets the one required hook."""


class NotAPolicy:
    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        return candidates[0]


class Lifo(QueuePolicy):
    """Last in, first out."""

    def __init__(self) -> None:
        self._q: dict[int, CallState] = {}

    def push(self, cs: CallState) -> None:
        self._q[cs.id] = cs

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        return next(reversed(self._q.values()), None)

    def remove(self, cs: CallState, released: bool) -> None:
        del self._q[cs.id]

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[CallState]:
        return iter(list(self._q.values()))
