"""An open program as this host keeps it (`flowserve.host.programs.book.LivePrograms`),
with, under replicas, this replica's part of its totals
(`flowserve.host.programs.shared`). Its fields change only through its own methods."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from flowserve.host.query import QueryHandle, QueryResult
from flowserve.types.programs import ProgramEnd


@dataclass(eq=False)
class OpenProgram:
    id: str
    tenant: str
    priority: int
    cls: str
    slo_s: float | None
    opened: float  # the driver's clock at its first call
    handle: QueryHandle | None = None  # None while its first call is being admitted
    ready: asyncio.Future[None] | None = None
    last: float = 0.0  # its latest call (idle timeout)
    calls: int = 0
    inflight: set[str] = field(default_factory=set)
    ended: ProgramEnd | None = None  # why it ends (None: open)
    summary: dict[str, Any] | None = None
    # replicas (gateway.state): this part's totals, written to the shared registry after each call
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    registered: bool = True
    done: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    service_s: float = 0.0
    last_wall: float = 0.0
    instances: set[str] = field(default_factory=set)
    threads: set[str] = field(default_factory=set)

    # ------------------------------------------------------------------ its life

    def admitted(self, handle: QueryHandle) -> None:
        """Its first call was admitted: its query is `handle`; calls waiting on it go on."""
        self.handle = handle
        if self.ready is not None:
            self.ready.set_result(None)
        self.ready = None

    def adopt(self, priority: int, cls: str, slo_s: float | None, opened: float) -> None:
        """A part of a program opened at another replica: its settings, and its age."""
        self.priority, self.cls, self.slo_s, self.opened = priority, cls, slo_s, opened

    def end(self, how: ProgramEnd) -> bool:
        """No more calls (`how`: why); False if it had ended already."""
        if self.ended is not None:
            return False
        self.ended = how
        return True

    def summarized(self, summary: dict[str, Any]) -> None:
        """Its query ended: `summary` is what DELETE and GET answer from now on."""
        self.summary = summary

    # ------------------------------------------------------------------ its calls

    def count_call(self) -> None:
        self.calls += 1

    def uncount_call(self) -> None:
        """A call counted but refused after all (a limit over every replica, an end elsewhere)."""
        self.calls -= 1

    def call_sent(self, key: str, thread: str, now: float) -> None:
        self.threads.add(thread)
        self.last_wall = time.time()
        self.inflight.add(key)
        self.last = now

    def call_dropped(self, key: str) -> None:
        """A call that never reached the core (its program's query had ended)."""
        self.inflight.discard(key)

    def call_over(self, key: str, now: float) -> None:
        self.inflight.discard(key)
        self.last = now

    def call_result(self, r: QueryResult) -> None:
        """A call's answer, into this part's totals (replicas)."""
        if r.completed and r.calls:
            c = r.calls[0]
            self.done += 1
            self.prompt_tokens += c.prompt_tokens
            self.cached_tokens += c.cached_tokens
            self.output_tokens += c.output_tokens
            self.instances.add(c.instance)
        else:
            self.failed += 1
        self.service_s += r.latency_s if math.isfinite(r.latency_s) and r.latency_s > 0 else 0.0
        self.last_wall = time.time()

    def registration(self, registered: bool) -> None:
        """Whether the shared registry holds this part's totals (replicas: False while Redis is lost)."""
        self.registered = registered
