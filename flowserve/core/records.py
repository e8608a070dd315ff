"""What the core records of its calls and reports of its instances: frozen records, read
by policies (an instance's recent history), metrics and the drivers' query API."""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.types.specs import InstanceSpec


@dataclass(frozen=True, slots=True)
class FinishedCall:
    """A finished call, as kept in an instance's recent history."""

    call_id: int
    workflow: str
    stage: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    enqueued: float
    released: float
    finished: float
    first_token: float | None
    predicted_s: float


@dataclass(frozen=True, slots=True)
class CallRecord:
    """Everything measured about one finished call (for metrics)."""

    call_id: int
    query_id: int
    workflow: str
    stage: str
    instance: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    ready: float
    enqueued: float
    released: float
    started: float | None
    first_token: float | None
    finished: float
    preemptions: int
    attempts: int


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """An instance as drivers see it (the core's query API)."""

    name: str
    spec: InstanceSpec
    up: bool
    queued: int
    running: int
    outstanding_s: float
    dispatched: int
    completed: int
