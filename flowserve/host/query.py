"""What the live driver hands its callers: a query's handle, its result, and refusals."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from flowserve.engines.backend import TokenSink
from flowserve.errors import FailureKind
from flowserve.graph.nodes import NodeResult
from flowserve.graph.oracle import Oracle
from flowserve.types.work import QueryClass, WorkflowRef


class Rejected(Exception):
    """A query was not accepted (429 overload, 503 draining); it never reached the core."""

    def __init__(self, status: int, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class CallReport:
    node: str
    stage: str
    instance: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    text: str
    finish_reason: str
    first_token: float | None
    finished: float
    ready: float | None = None  # when the call became ready (finished − ready: its latency)
    extra: Mapping[str, Any] | None = None  # the answer beyond its text (tool_calls, logprobs)


class QueryStatus(StrEnum):
    """How a query ended (its value is what JSON bodies show)."""

    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class QueryResult:
    id: int
    workflow: str
    status: QueryStatus
    reason: str | None  # why it failed, for people
    latency_s: float
    deadline_met: bool | None
    output: dict[str, Any]
    calls: tuple[CallReport, ...]
    kind: FailureKind | None = None  # what failed (None: completed)

    @property
    def completed(self) -> bool:
        return self.status is QueryStatus.COMPLETED


def call_reports(results: dict[str, NodeResult]) -> tuple[CallReport, ...]:
    """The LLM calls among a query's node results, in the order they finished."""
    calls = [CallReport(key, r.stage, r.instance, r.prompt_tokens, r.cached_tokens, r.output_tokens, r.text or "",
                        r.finish_reason or "length", r.first_token, r.finished or 0.0, r.ready, r.extra)
             for key, r in results.items() if r.instance is not None]
    return tuple(sorted(calls, key=lambda c: c.finished))


@dataclass(frozen=True, slots=True)
class QueryTicket:
    """An admitted query as the host's facts name it: who sent what, and when it arrived
    (its handle holds the rest: futures, sink, replay oracle)."""

    id: int
    ref: str  # its id for clients
    workflow: str  # its name (metrics)
    factory: str  # the workflow factory its `WorkflowRef` names
    tenant: str
    slo_s: float | None
    arrival: float


def new_ref() -> str:
    """An id for clients that nobody can guess (the core's ids count up)."""
    return "q-" + secrets.token_hex(12)


@dataclass(eq=False)
class CallHandle:
    """One call of a program, awaited by its client like a one-call query's handle:
    `done` resolves with a one-call result, `routed` with the instance it went to, `sink`
    receives its streamed text."""

    id: int
    query_id: int  # its program's query
    key: str
    done: asyncio.Future[QueryResult]
    routed: asyncio.Future[str]
    sink: TokenSink | None
    sent: float  # when the driver took it (its latency's start)
    engine: Mapping[str, Any] | None = None  # the engine's own fields of its answer (id, created, fingerprint)
    ref: str = field(default_factory=new_ref)  # its id for its client (no lookup: see QueryHandle.ref)

    def answered_by(self, own: Mapping[str, Any]) -> None:
        """What the engine says of its answer (its id, created, fingerprint)."""
        self.engine = own


@dataclass(eq=False)
class QueryHandle:
    """A query the driver took: `accepted` resolves when the core has it (or raises
    `Rejected`), `done` with its result, `routed` with the instance its first call went
    to. `sink` receives the streamed text of a one-call query; `oracle` makes a replayed
    query produce its recorded lengths. `ref` is its id for clients (random: the core's
    `id` counts up, and a client must not find other tenants' queries by counting)."""

    id: int
    workflow: str
    workflow_ref: WorkflowRef  # the workflow the core builds for it
    model: str | None
    tenant: str
    priority: int
    slo_s: float | None
    accepted: asyncio.Future[None]
    done: asyncio.Future[QueryResult]
    sink: TokenSink | None = None
    oracle: Oracle | None = None
    arrival: float | None = None
    cls: QueryClass = "interactive"
    calls_finished: int = 0
    routed: asyncio.Future[str] | None = None  # the instance of the first call sent
    steps: dict[str, CallHandle] = field(default_factory=dict)  # a program's calls awaiting their answer
    ref: str = field(default_factory=new_ref)
    engine: Mapping[str, Any] | None = None  # a one-call query: the engine's own fields of its answer
    ticket: QueryTicket | None = None  # once admitted

    def admit(self, now: float) -> QueryTicket:
        """The core took it now."""
        self.arrival = now
        self.ticket = QueryTicket(self.id, self.ref, self.workflow, self.workflow_ref.name, self.tenant, self.slo_s,
                                  now)
        return self.ticket

    def call_finished(self) -> None:
        self.calls_finished += 1

    def answered_by(self, own: Mapping[str, Any]) -> None:
        """A one-call query: what the engine says of its answer (id, created, fingerprint)."""
        self.engine = own

    def channel(self, node: str) -> QueryHandle | CallHandle:
        """Where the answer of step `node` goes: its own client's handle (a program's
        call), else the query's."""
        return self.steps.get(node, self)


def query_body(ref: str, r: QueryResult) -> dict[str, Any]:
    """A finished query as `GET /v1/queries/{id}` and a workflow's answer show it (`ref`:
    its id for clients)."""
    return {"id": ref, "workflow": r.workflow, "status": r.status, "reason": r.reason,
            "latency_s": r.latency_s, "deadline_met": r.deadline_met, "output": r.output,
            "calls": [{"node": c.node, "stage": c.stage, "instance": c.instance,
                       "prompt_tokens": c.prompt_tokens, "cached_tokens": c.cached_tokens,
                       "output_tokens": c.output_tokens} for c in r.calls]}
