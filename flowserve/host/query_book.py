"""The gateway's ledger of queries: the open ones, the recently finished ones (for
`GET /v1/queries/{id}`), and which query each call and tool op belongs to."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from flowserve.errors import FailureKind
from flowserve.host.metrics import GatewayMetrics
from flowserve.host.query import QueryHandle, QueryResult, QueryStatus, call_reports
from flowserve.host.record import QueryRecorder
from flowserve.types.commands import QueryDone, QueryFailed, StepDone
from flowserve.types.events import CallFailed, CallFinished, OpFinished, Tokenized
from flowserve.types.work import LLMCall

FINISHED_KEPT = 10_000  # finished queries kept for GET /v1/queries/{id}


class QueryBook:
    def __init__(self, metrics: GatewayMetrics, record: str | None = None, origin: float = 0.0,
                 scale: float = 1.0) -> None:
        """record: a folder to record finished programs and workflow queries in
        (`QueryRecorder`, from the driver's clock at `origin`, `scale` engine seconds per second)."""
        self.metrics = metrics
        self.recorder = QueryRecorder(record, origin, scale, metrics.record_errors.inc) if record else None
        self.open: dict[int, QueryHandle] = {}
        self.finished: OrderedDict[int, QueryHandle] = OrderedDict()
        self.refs: dict[str, int] = {}  # a client's query id → the core's
        self.calls: dict[int, QueryHandle] = {}  # call id → its query
        self.ops: dict[int, int] = {}  # running tool op → its query id
        self.on_resolved: Callable[[QueryHandle], None] | None = None  # replicas publish finished queries

    def get(self, query_id: int) -> QueryHandle | None:
        return self.open.get(query_id) or self.finished.get(query_id)

    def opened(self, h: QueryHandle) -> None:
        self.open[h.id] = h
        self.refs[h.ref] = h.id

    def by_ref(self, ref: str) -> QueryHandle | None:
        """An open or recently finished query by its clients' id."""
        query_id = self.refs.get(ref)
        return None if query_id is None else self.get(query_id)

    def track_call(self, call_id: int, h: QueryHandle, sent: LLMCall | None = None) -> None:
        """The call belongs to `h`; `sent`: it went to an engine now."""
        self.calls[call_id] = h
        h.call_ids.add(call_id)
        if sent is not None and self.recorder is not None and self.recorder.records(h):
            self.recorder.sent(sent)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    def query_of(self, item: Any) -> QueryHandle | None:
        """The open query an inbox item belongs to, if any."""
        if isinstance(item, QueryHandle):
            return item
        if isinstance(item, CallFinished | CallFailed | Tokenized):
            return self.calls.get(item.call_id)
        if isinstance(item, OpFinished):
            qid = self.ops.pop(item.op_id, None)
            return None if qid is None else self.open.get(qid)
        return None

    def resolve(self, h: QueryHandle, now: float, met: bool | None, done: QueryDone | None = None,
                failure: tuple[FailureKind, str] | None = None, failed: QueryFailed | None = None) -> None:
        """End a query — completed (`done`) or failed (`failure`: its kind and reason; `failed`:
        the core's command, when the core failed it) — with its client's result and its
        metrics; it moves to the finished."""
        assert (done is None) != (failure is None)
        status = QueryStatus.COMPLETED if failure is None else QueryStatus.FAILED
        kind, reason = failure if failure is not None else (None, None)
        self.open.pop(h.id, None)
        for cid in h.call_ids:
            self.calls.pop(cid, None)
        # a program's latency ends with its last call (`done.latency`), not when it was closed
        latency = done.latency if done is not None else now - (h.arrival if h.arrival is not None else now)
        output = dict(done.output) if done is not None else {}
        calls = call_reports(dict(done.results)) if done is not None else ()
        if not h.done.done():
            h.done.set_result(QueryResult(h.id, h.workflow, status, reason, latency, met, output, calls, kind))
        m = self.metrics
        m.queries.labels(h.workflow, status).inc()
        if failure is None:
            m.latency.labels(h.workflow).observe(latency)
        if h.slo_s is not None:
            m.tenants.add(h.tenant, ("slo", "met" if met else "missed"), 1)
        for c in calls:
            m.tenants.add(h.tenant, ("tokens", "prompt"), c.prompt_tokens, c.prompt_tokens + c.output_tokens)
            m.tenants.add(h.tenant, ("tokens", "output"), c.output_tokens)
        for ch in h.steps.values():  # a program's calls still waiting end with it
            if not ch.done.done():
                ch.done.set_result(QueryResult(ch.id, h.workflow, QueryStatus.FAILED, reason or "ended", now - ch.sent,
                                               None, {}, (), kind or FailureKind.CANCELLED))
        h.steps.clear()
        if self.recorder is not None and self.recorder.records(h):  # after the answer: never in its way
            self.recorder.ended(h, done, failed)
        if self.on_resolved is not None:
            self.on_resolved(h)
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
        self.metrics.queries.labels("program-call", status).inc()
        ch.done.set_result(QueryResult(ch.id, h.workflow, status, r.error, now - ch.sent, None, {}, calls,
                                       None if r.error is None else r.error_kind or FailureKind.INTERNAL))
