"""The host's ledger of queries: the open ones, the recently finished ones (for
`GET /v1/queries/{id}`), and which query each running tool op belongs to (a call's
query: `flowserve.host.live_calls`). A query's end is published as a fact (`QueryEnded`)
once its client has the result: the metrics, the recorder and a replica hear it there."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from flowserve.errors import FailureKind
from flowserve.host.facts import CallEnded, Fact, QueryEnded
from flowserve.host.live_calls import LiveCalls
from flowserve.host.query import QueryHandle, QueryResult, QueryStatus, call_reports
from flowserve.types.commands import QueryDone, QueryFailed, StepDone
from flowserve.types.events import CallFailed, CallFinished, OpFinished, Tokenized

FINISHED_KEPT = 10_000  # finished queries kept for GET /v1/queries/{id}


class QueryBook:
    def __init__(self, calls: LiveCalls, publish: Callable[[Fact], None],
                 count_step: Callable[[QueryStatus], None]) -> None:
        """calls: the host's live calls (whose query each is); publish: the host's
        listeners; count_step: a program's call answered (metrics)."""
        self._calls = calls
        self._publish = publish
        self._count_step = count_step
        self.open: dict[int, QueryHandle] = {}
        self.finished: OrderedDict[int, QueryHandle] = OrderedDict()
        self.refs: dict[str, int] = {}  # a client's query id → the core's
        self._ops: dict[int, int] = {}  # running tool op → its query id

    def get(self, query_id: int) -> QueryHandle | None:
        return self.open.get(query_id) or self.finished.get(query_id)

    def opened(self, h: QueryHandle, now: float) -> None:
        """The core takes the query now."""
        h.admit(now)
        self.open[h.id] = h
        self.refs[h.ref] = h.id

    def by_ref(self, ref: str) -> QueryHandle | None:
        """An open or recently finished query by its clients' id."""
        query_id = self.refs.get(ref)
        return None if query_id is None else self.get(query_id)

    def op_started(self, op_id: int, query_id: int) -> None:
        self._ops[op_id] = query_id

    def op_ended(self, op_id: int) -> None:
        self._ops.pop(op_id, None)

    def query_of(self, item: Any) -> QueryHandle | None:
        """The open query an inbox item belongs to, if any."""
        if isinstance(item, QueryHandle):
            return item
        if isinstance(item, CallFinished | CallFailed | Tokenized):
            return self._calls.query_of(item.call_id)
        if isinstance(item, OpFinished):
            qid = self._ops.pop(item.op_id, None)
            return None if qid is None else self.open.get(qid)
        return None

    def call_ended(self, fact: CallEnded) -> None:
        """A listener: a query's call answered (its progress, as `GET /v1/queries/ID` shows it)."""
        if fact.current and isinstance(fact.outcome, CallFinished):
            h = self._calls.query_of(fact.call_id)
            if h is not None:
                h.call_finished()

    def resolve(self, h: QueryHandle, now: float, met: bool | None, done: QueryDone | None = None,
                failure: tuple[FailureKind, str] | None = None, failed: QueryFailed | None = None) -> None:
        """End a query — completed (`done`) or failed (`failure`: its kind and reason; `failed`:
        the core's command, when the core failed it) — with its client's result; it moves
        to the finished, and its end is published (`QueryEnded`)."""
        if (done is None) == (failure is None):
            raise ValueError("a query ends completed or failed, not both")
        status = QueryStatus.COMPLETED if failure is None else QueryStatus.FAILED
        kind, reason = failure if failure is not None else (None, None)
        self.open.pop(h.id, None)
        self._calls.query_ended(h.id)
        # a program's latency ends with its last call (`done.latency`), not when it was closed
        latency = done.latency if done is not None else now - (h.arrival if h.arrival is not None else now)
        output = dict(done.output) if done is not None else {}
        calls = call_reports(dict(done.results)) if done is not None else ()
        result = QueryResult(h.id, h.workflow, status, reason, latency, met, output, calls, kind)
        if not h.done.done():
            h.done.set_result(result)
        for ch in h.steps.values():  # a program's calls still waiting end with it
            if not ch.done.done():
                ch.done.set_result(QueryResult(ch.id, h.workflow, QueryStatus.FAILED, reason or "ended", now - ch.sent,
                                               None, {}, (), kind or FailureKind.CANCELLED))
        h.steps.clear()
        if h.ticket is not None:  # after the answer: its listeners are never in its way
            self._publish(QueryEnded(now, h.ticket, result, done, failed))
        self.finished[h.id] = h
        while len(self.finished) > FINISHED_KEPT:
            self.refs.pop(self.finished.popitem(last=False)[1].ref, None)

    def step_done(self, cmd: StepDone, now: float) -> None:
        """A program's call ended: its client gets a one-call result."""
        h = self.open.get(cmd.query_id)
        ch = None if h is None else h.steps.pop(cmd.key, None)
        if ch is None or ch.done.done():
            return
        r = cmd.result
        status = QueryStatus.FAILED if r.error is not None else QueryStatus.COMPLETED
        calls = call_reports({cmd.key: r}) if r.error is None else ()
        self._count_step(status)
        ch.done.set_result(QueryResult(ch.id, h.workflow, status, r.error, now - ch.sent, None, {}, calls,
                                       None if r.error is None else r.error_kind or FailureKind.INTERNAL))
