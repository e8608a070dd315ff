"""An open program as this gateway keeps it (`flowserve.host.programs.book.LivePrograms`),
with, under replicas, this replica's part of its totals
(`flowserve.host.programs.shared`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from flowserve.host.query import QueryHandle
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
