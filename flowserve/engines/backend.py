"""What the live driver needs from an engine instance, whatever runs it.

A backend runs one LLM call at a time per `begin` (an awaitable outcome) and may push
engine-side events (capacity, evictions) to the driver. Transport errors are
`EngineError`s that say whether trying again can help; the driver owns retries, the
circuit breaker and the core owns re-dispatch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from flowserve.engines.client import EngineError
from flowserve.tokenize.chat import ChatTokenizer
from flowserve.types.events import Event
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

__all__ = ["Backend", "CallOutcome", "Emit", "EngineError", "EngineRequest", "TokenSink"]


@dataclass(frozen=True, slots=True)
class CallOutcome:
    output_tokens: int
    cached_tokens: int = 0
    prompt_tokens: int = 0
    text: str = ""
    finish_reason: str = "length"
    started: float | None = None  # driver clock
    first_token: float | None = None
    extra: Mapping[str, Any] | None = None  # the answer beyond its text (tool_calls, logprobs; plain JSON)
    own: Mapping[str, Any] | None = None  # what the engine says of its answer: its id, created, system_fingerprint
    failed_over: str | None = None  # the proxy answered from this other instance after the call's own failed


class TokenSink:
    """Where a streaming request's deltas go (the gateway's SSE response reads them): text,
    or a whole choice of the engine's chunk when it carries more than text (tool-call
    deltas, logprobs), relayed unchanged.

    `sent` counts deltas already handed out. `committed` says the answer is no longer
    the driver's to retry: its client has seen part of it (here, from the first delta) —
    or, for a sink that hands the request on (the endpoint picker's `Pick`), someone else
    carries it; a failed call is then final, and `committed_how` says why in its reason.
    """

    committed_how = "after part of the answer was streamed"

    def __init__(self, put: Callable[[str | Mapping[str, Any] | EngineFields], None]) -> None:
        self._put = put
        self.sent = 0
        self.committed = False

    def push(self, delta: str) -> None:
        if delta:
            self.sent += 1
            self.committed = True
            self._put(delta)

    def push_choice(self, choice: Mapping[str, Any]) -> None:
        """An engine chunk's choice (without `index` and `finish_reason`)."""
        self.sent += 1
        self.committed = True
        self._put(choice)

    def own(self, fields: Mapping[str, Any]) -> None:
        """What the engine says of its answer (its id, ...), before its first delta: the
        stream's chunks carry them. Not a delta: nothing of the answer was shown yet."""
        self._put(EngineFields(fields))


@dataclass(frozen=True, slots=True)
class EngineFields:
    """A stream item: the engine's own fields of its answer (`TokenSink.own`)."""

    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """How the driver asks an engine for one call, beyond the call itself (its token ids
    and sampling parameters): the length to produce, and where streamed text goes."""

    max_tokens: int
    ignore_eos: bool = False  # replays: produce exactly max_tokens (the oracle's length)
    sink: TokenSink | None = None


Emit = Callable[[Event], None]


class Backend(Protocol):
    spec: InstanceSpec
    # the router's tokenizer of the engine's model (its `/tokenize`, its chat rendering);
    # None: a simulated engine, whose words the gateway's word tokenizer stands for
    tokenizer: ChatTokenizer | None

    def begin(self, call: LLMCall, req: EngineRequest) -> Awaitable[CallOutcome]:
        """Start the call now; the awaitable raises EngineError on failure. Cancelling it
        aborts the call on the engine."""
        ...

    async def probe(self) -> bool:
        """Is the engine reachable again (half-open circuit)?"""
        ...

    async def aclose(self) -> None: ...
