"""What the live host reports happened, as typed facts, and the table of who listens.

The core speaks in events and commands; the host around it speaks in facts: the driver,
the call runner and the program book each publish what they did — an instance opened,
a call sent or ended, a query or a program ended, a policy changed its parameters — as
a frozen dataclass, and `Listeners` hands it to every function registered for its type,
in order. The cache estimate, the KV feeds, the metrics, the recorder and a replica's
sync are such listeners, registered once by the composition root
(`flowserve.host.root`): nothing reaches into the driver to set a hook, a second
listener never replaces the first, and the table says in one place who hears what
(docs/architecture.md draws it). A fact type without a listener list is an error at
composition.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowserve.engines.backend import Backend
from flowserve.host.query import QueryResult, QueryTicket
from flowserve.types.commands import PolicyChanged, QueryDone, QueryFailed
from flowserve.types.events import CallFailed, CallFinished
from flowserve.types.programs import ProgramEnd
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall


@dataclass(frozen=True, slots=True)
class InstanceOpened:
    """An LLM instance's backend was opened (start-up, or an administrator added it)."""

    time: float
    spec: InstanceSpec
    backend: Backend


@dataclass(frozen=True, slots=True)
class InstanceClosed:
    """An LLM instance's backend was closed (removed, or replaced by another spec)."""

    time: float
    name: str


@dataclass(frozen=True, slots=True)
class CallSent:
    """A call went to its engine (again, after a retryable failure elsewhere)."""

    time: float
    call: LLMCall
    instance: str
    query: QueryTicket | None  # its query, while it is open


@dataclass(frozen=True, slots=True)
class CallEnded:
    """A call's engine request ended — before the core hears of it."""

    time: float
    call_id: int
    instance: str
    outcome: CallFinished | CallFailed | None  # None: the core cancelled it
    current: bool  # the call's current attempt (not a late answer from an instance it was moved off)


@dataclass(frozen=True, slots=True)
class QueryEnded:
    """A query ended and its client has its result."""

    time: float
    query: QueryTicket
    result: QueryResult
    done: QueryDone | None  # the core's command, when it completed
    failed: QueryFailed | None  # the core's command, when the core failed it


@dataclass(frozen=True, slots=True)
class ProgramEnded:
    """A program's query ended (its summary is kept)."""

    time: float
    how: ProgramEnd
    completed: bool
    deadline_met: bool | None  # None: it had no deadline


# PolicyChanged is the core's own command, published as it is
Fact = InstanceOpened | InstanceClosed | CallSent | CallEnded | QueryEnded | ProgramEnded | PolicyChanged
FACTS: tuple[type, ...] = typing.get_args(Fact)
Listener = Callable[[Any], None]


class Listeners:
    """Fact type → the functions that hear it, fixed at composition."""

    def __init__(self, table: Mapping[type, Sequence[Listener]]) -> None:
        missing = [t.__name__ for t in FACTS if t not in table]
        unknown = [t.__name__ for t in table if t not in FACTS]
        if missing or unknown:
            raise TypeError(f"the host's listener table: no list for {missing}, not a fact: {unknown}")
        self.table: Mapping[type, tuple[Listener, ...]] = {t: tuple(fns) for t, fns in table.items()}

    def publish(self, fact: Fact) -> None:
        for fn in self.table[type(fact)]:
            fn(fact)
