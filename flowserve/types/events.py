"""Events: what drivers tell the scheduler core (`SchedulerCore.handle`).

Every event carries its own timestamp (seconds on the driver's clock: virtual time in
the simulator, monotonic time in the live gateway); the core never reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowserve.errors import FailureKind
from flowserve.types.kv import KVCacheEvents, KVViewChanged, SlotsResident
from flowserve.types.peers import PeerLoad, PeerRouted, PeerService, ProgramShared
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, Tokens


@dataclass(frozen=True, slots=True)
class QueryArrived:
    time: float
    query: Query


@dataclass(frozen=True, slots=True)
class CallFinished:
    time: float
    call_id: int
    instance: str
    output_tokens: int
    cached_tokens: int = 0
    started: float | None = None  # when the engine began the call (first scheduled)
    first_token: float | None = None
    preemptions: int = 0
    text: str | None = None  # the answer (live engines)
    finish_reason: str | None = None
    prompt_tokens: int = 0  # as the engine counted them (0: unknown)
    extra: Mapping[str, Any] | None = None  # the answer beyond its text (tool_calls, logprobs; plain JSON)


@dataclass(frozen=True, slots=True)
class PrefillDone:
    """The engine finished the call's prefill (its first token exists): its prompt is in
    the engine's prefix cache now."""

    time: float
    call_id: int
    instance: str


@dataclass(frozen=True, slots=True)
class CallProgress:
    """Part `index` of a running call's output is complete (decode pipelining): the
    engine produced `output_tokens` more tokens for it (`text` live)."""

    time: float
    call_id: int
    instance: str
    index: int
    output_tokens: int = 0
    text: str | None = None


@dataclass(frozen=True, slots=True)
class CallFailed:
    time: float
    call_id: int
    instance: str
    reason: str
    retryable: bool = True
    kind: FailureKind = FailureKind.ENGINE_ERROR


@dataclass(frozen=True, slots=True)
class OpFinished:
    time: float
    op_id: int
    error: str | None = None
    result: Any = None
    output_tokens: int = 0  # modelled size of the result (simulated tools)
    kind: FailureKind = FailureKind.TOOL_ERROR  # what failed, when `error` is set


@dataclass(frozen=True, slots=True)
class InstanceUp:
    time: float
    spec: InstanceSpec


@dataclass(frozen=True, slots=True)
class InstanceDown:
    time: float
    instance: str
    reason: str = "down"


@dataclass(frozen=True, slots=True)
class InstanceCapacity:
    """What the engine can start right now (simulated engines report it after each step).

    free_seqs: sequence slots; headroom_tokens: prompt tokens the next iteration's budget
    can still take; kv_free_tokens: KV cache tokens free or evictable.
    """

    time: float
    instance: str
    free_seqs: int
    headroom_tokens: int
    kv_free_tokens: int


@dataclass(frozen=True, slots=True)
class PrefixEvicted:
    """The engine evicted tokens[start:] of this cached sequence."""

    time: float
    instance: str
    tokens: Tokens
    start: int


@dataclass(frozen=True, slots=True)
class Tick:
    time: float


@dataclass(frozen=True, slots=True)
class Tokenized:
    """The driver tokenized a call's prompt (answer to `Tokenize`)."""

    time: float
    call_id: int
    tokens: Tokens | None = None
    error: str | None = None
    kind: FailureKind = FailureKind.ENGINE_ERROR  # what failed, when `error` is set


@dataclass(frozen=True, slots=True)
class QueryCancelled:
    """Nobody waits for the query any more (its client went away): the core fails it
    with `reason`, cancelling its running calls and dropping its queued ones."""

    time: float
    query_id: int
    reason: str = "cancelled"


@dataclass(frozen=True, slots=True)
class QueryInput:
    """Input for an open query — a program's next call — that its workflow turns into
    steps (`Workflow.on_input`; only open-ended workflows take input)."""

    time: float
    query_id: int
    data: Any


@dataclass(frozen=True, slots=True)
class QueryClosed:
    """An open query takes no more input: it finishes once its steps did."""

    time: float
    query_id: int


@dataclass(frozen=True, slots=True)
class CallCancelled:
    """Cancel one step of a query (its client went away): the call ends CANCELLED. An
    open-ended query (a program) goes on without it; any other query fails with `reason`."""

    time: float
    query_id: int
    node: str
    reason: str = "cancelled by the client"


@dataclass(frozen=True, slots=True)
class JobFinished:
    """A `RunJob` the driver ran (off the event path) has finished."""

    time: float
    job_id: int
    result: Any = None
    error: str | None = None


Event = (
    QueryArrived
    | QueryCancelled
    | CallFinished
    | CallProgress
    | PrefillDone
    | CallFailed
    | OpFinished
    | InstanceUp
    | InstanceDown
    | InstanceCapacity
    | PrefixEvicted
    | Tick
    | Tokenized
    | JobFinished
    | QueryInput
    | QueryClosed
    | CallCancelled
    | PeerLoad
    | PeerRouted
    | PeerService
    | ProgramShared
    | KVCacheEvents
    | KVViewChanged
    | SlotsResident
)
