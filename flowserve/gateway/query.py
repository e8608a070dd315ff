"""What the live driver hands its callers: a query's handle, its result, and refusals."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from flowserve.apps.registry import LiveProgram


class Rejected(Exception):
    """A query was not accepted (429 overload, 503 draining); it never reached the core."""

    def __init__(self, status: int, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class CallReport:
    call_id: int
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


@dataclass(frozen=True)
class QueryResult:
    id: int
    workflow: str
    status: str  # "completed" | "failed"
    reason: str | None
    latency_s: float
    deadline_met: bool | None
    output: dict[str, Any]
    calls: tuple[CallReport, ...]


@dataclass(eq=False)
class QueryHandle:
    id: int
    workflow: str
    program: LiveProgram
    model: str | None
    tenant: str
    priority: int
    slo_s: float | None
    accepted: asyncio.Future[None]
    done: asyncio.Future[QueryResult]
    arrival: float | None = None
    calls: dict[str, CallReport] = field(default_factory=dict)
    call_ids: set[int] = field(default_factory=set)
