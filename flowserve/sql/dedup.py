"""Exact deduplication: one call per distinct prompt, the answer fanned out to its rows."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dedup:
    first: tuple[int, ...]  # per distinct key, the first row that has it (send order)
    index: tuple[int, ...]  # per row, the position of its key in `first`

    @property
    def saved(self) -> int:
        return len(self.index) - len(self.first)


def dedup(keys: Sequence[Hashable]) -> Dedup:
    pos: dict[Hashable, int] = {}
    first: list[int] = []
    index: list[int] = []
    for i, k in enumerate(keys):
        j = pos.get(k)
        if j is None:
            j = pos[k] = len(first)
            first.append(i)
        index.append(j)
    return Dedup(tuple(first), tuple(index))


def no_dedup(n: int) -> Dedup:
    return Dedup(tuple(range(n)), tuple(range(n)))
