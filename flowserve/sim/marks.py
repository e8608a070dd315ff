"""Parts of simulated outputs, released at the token where each completes (decode
pipelining, Teola §4.2): the engine's decode iterations reach each mark in closed form,
so a stretch of iterations ends at the next mark as it ends at the next completion."""

from __future__ import annotations

import heapq

from flowserve.sim.sequence import DECODE, Seq
from flowserve.types.events import CallProgress

NEVER = 1 << 62


class OutputMarks:
    def __init__(self, instance: str) -> None:
        self.instance = instance
        self._marks: dict[int, tuple[int, ...]] = {}  # call → cumulative tokens at each part's end
        self._sent: dict[int, int] = {}  # call → parts released so far
        self._heap: list[tuple[int, int, int, int, Seq]] = []  # (due iteration, order, index, iter_base, seq)

    def add(self, call_id: int, marks: tuple[int, ...]) -> None:
        if not marks:
            return
        assert list(marks) == sorted(marks) and marks[0] >= 1, marks
        self._marks[call_id] = tuple(marks)
        self._sent[call_id] = 0

    def drop(self, call_id: int) -> None:
        self._marks.pop(call_id, None)
        self._sent.pop(call_id, None)

    def _event(self, call_id: int, index: int, now: float) -> CallProgress:
        marks = self._marks[call_id]
        self._sent[call_id] = index + 1
        return CallProgress(now, call_id, self.instance, index, marks[index] - (marks[index - 1] if index else 0))

    def start(self, s: Seq, now: float) -> list[CallProgress]:
        """`s` (re)starts decoding: release the parts it already has, schedule the rest."""
        cid = s.call.id
        marks = self._marks.get(cid)
        if not marks:
            return []
        out = []
        for i in range(self._sent[cid], len(marks)):
            if marks[i] <= s.gen_base:
                out.append(self._event(cid, i, now))
            else:
                heapq.heappush(self._heap, (s.iter_base + marks[i] - s.gen_base, s.order, i, s.iter_base, s))
        return out

    def _valid(self, entry: tuple[int, int, int, int, Seq]) -> bool:
        _, _, index, base, s = entry
        cid = s.call.id
        return s.state == DECODE and s.iter_base == base and self._sent.get(cid, NEVER) == index

    def next_due(self, dec_iter: int) -> int:
        """Iterations until the next part completes (a stretch ends there)."""
        heap = self._heap
        while heap and not self._valid(heap[0]):
            heapq.heappop(heap)
        return max(1, heap[0][0] - dec_iter) if heap else NEVER

    def due(self, dec_iter: int, now: float) -> list[CallProgress]:
        out = []
        heap = self._heap
        while heap and (heap[0][0] <= dec_iter or not self._valid(heap[0])):
            entry = heapq.heappop(heap)
            if self._valid(entry):
                out.append(self._event(entry[4].call.id, entry[2], now))
        return out

    def finish(self, call_id: int, generated: int, now: float) -> list[CallProgress]:
        """The call ends: every part not released yet completes now."""
        marks = self._marks.get(call_id)
        out = [self._event(call_id, i, now) for i in range(self._sent[call_id], len(marks))] if marks else []
        self.drop(call_id)
        return out
