"""The life of an LLM call in the core: its statuses and the transitions allowed between
them, checked at every move as h11's `_state.py` checks its connection states: a move the
table does not allow raises `TransitionError` (a raise, not an assert, which `python -O`
would remove).

    READY ──► WAITING ──► READY                       token ids asked of the driver
    READY ──► QUEUED ──► RELEASED ──► RUNNING ──► FINISHED
                 │           │           │
                 └─► READY ◄─┴───────────┘             instance lost, or a retryable failure
    any live status ──► FAILED                         its own failure fails the query
    any live status ──► CANCELLED                      its query ended without it

* READY: its node is ready and it is bound to no instance (in the late-binding pool, or
  about to be dispatched);
* WAITING: held until something it needs arrives — its token ids from the driver
  (`Tokenize` → `Tokenized`);
* QUEUED: bound to an instance, waiting in that instance's queue (the queue policy
  orders it);
* RELEASED: sent to the engine (`SendCall`); nothing heard back yet;
* RUNNING: the engine reported progress on it (a part of its output is complete);
* FINISHED, FAILED, CANCELLED: final.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from flowserve.errors import FailureKind, FlowserveError


class CallStatus(Enum):
    READY = "ready"
    WAITING = "waiting"
    QUEUED = "queued"
    RELEASED = "released"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"

    # members are singletons: hashing by identity is C-level, Enum's hash(name) is a Python call
    __hash__ = object.__hash__

    @property
    def final(self) -> bool:
        return self in FINAL

    @property
    def in_flight(self) -> bool:
        """Sent to an engine: the engine may still report on it."""
        return self is CallStatus.RELEASED or self is CallStatus.RUNNING


FINAL = frozenset({CallStatus.FINISHED, CallStatus.FAILED, CallStatus.CANCELLED})
_ENDS = FINAL - {CallStatus.FINISHED}

TRANSITIONS: Mapping[CallStatus, frozenset[CallStatus]] = {
    CallStatus.READY: frozenset({CallStatus.WAITING, CallStatus.QUEUED, *_ENDS}),
    CallStatus.WAITING: frozenset({CallStatus.READY, *_ENDS}),
    CallStatus.QUEUED: frozenset({CallStatus.RELEASED, CallStatus.READY, *_ENDS}),
    CallStatus.RELEASED: frozenset({CallStatus.RUNNING, CallStatus.FINISHED, CallStatus.READY, *_ENDS}),
    CallStatus.RUNNING: frozenset({CallStatus.FINISHED, CallStatus.READY, *_ENDS}),
    CallStatus.FINISHED: frozenset(),
    CallStatus.FAILED: frozenset(),
    CallStatus.CANCELLED: frozenset(),
}


def allowed(frm: CallStatus, to: CallStatus) -> bool:
    return to in TRANSITIONS[frm]


class TransitionError(FlowserveError):
    """A call was moved along a transition the table does not allow: a bug in the core."""

    kind = FailureKind.INTERNAL

    def __init__(self, call_id: int, frm: CallStatus, to: CallStatus) -> None:
        super().__init__(f"call {call_id}: no transition {frm.value} → {to.value}")
        self.call_id, self.frm, self.to = call_id, frm, to
