"""The host's one record of a live call: whose query it serves, and its engine request
while one runs.

The core keeps each call's scheduling state (`CallState`: its status, its instance);
the host keeps, per call id, what the core cannot: the query handle its answer goes to
(from the call's tokenization or first sending until its query ends) and its running
engine request (the call as sent, where, when, the task, whose client streams it). A
call re-dispatched after a failure keeps its record; each sending is a new attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from flowserve.host.query import CallHandle, QueryHandle
from flowserve.types.work import LLMCall


class LiveCall:
    __slots__ = ("call", "channel", "id", "instance", "query", "sent", "task")

    def __init__(self, call_id: int, query: QueryHandle | None) -> None:
        self.id = call_id
        self.query = query  # None once its query ended (or when it had none open)
        self.call: LLMCall | None = None  # the current attempt's
        self.instance: str | None = None
        self.sent = 0.0
        self.channel: QueryHandle | CallHandle | None = None  # whose client gets the answer
        self.task: asyncio.Task[Any] | None = None  # the engine request, while it runs

    def attempt(self, call: LLMCall, instance: str, now: float) -> None:
        """The call goes to `instance` now (its channel: the query's step, if any)."""
        self.call, self.instance, self.sent = call, instance, now
        self.channel = self.query.channel(call.node) if self.query is not None else None

    def run(self, task: asyncio.Task[Any]) -> None:
        self.task = task

    def runs_on(self, instance: str) -> bool:
        return self.task is not None and self.instance == instance

    def stop(self, task: asyncio.Task[Any] | None = None) -> None:
        """The attempt ended (`task`: only if it is still the current one), or is cancelled."""
        if task is None or task is self.task:
            if task is None and self.task is not None:
                self.task.cancel()
            self.task = None

    def orphan(self) -> None:
        """Its query ended while its request still runs."""
        self.query = None
        self.channel = None


class LiveCalls:
    def __init__(self) -> None:
        self._calls: dict[int, LiveCall] = {}
        self._of_query: dict[int, list[int]] = {}  # query id → its calls' ids

    def track(self, call_id: int, query: QueryHandle | None) -> LiveCall:
        """The call's record, made when the host first hears of it."""
        lc = self._calls.get(call_id)
        if lc is None:
            lc = self._calls[call_id] = LiveCall(call_id, query)
            if query is not None:
                self._of_query.setdefault(query.id, []).append(call_id)
        return lc

    def get(self, call_id: int) -> LiveCall | None:
        return self._calls.get(call_id)

    def query_of(self, call_id: int) -> QueryHandle | None:
        lc = self._calls.get(call_id)
        return None if lc is None else lc.query

    def ended(self, lc: LiveCall, task: asyncio.Task[Any] | None = None) -> None:
        """An attempt ended; a call whose query ended goes with it."""
        lc.stop(task)
        if lc.query is None and lc.task is None and self._calls.get(lc.id) is lc:
            del self._calls[lc.id]

    def query_ended(self, query_id: int) -> None:
        """Its calls go, but for those whose request still runs (they go when it ends)."""
        for call_id in self._of_query.pop(query_id, ()):
            lc = self._calls.get(call_id)
            if lc is None:
                continue
            if lc.task is None:
                del self._calls[call_id]
            else:
                lc.orphan()

    def __len__(self) -> int:
        return len(self._calls)
