"""Work items: the LLM calls, tool ops and queries the scheduler core handles.

Plain frozen data; token ids are tuples (`Tokens`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from flowserve.types.tokens import Tokens

if TYPE_CHECKING:
    from flowserve.graph.prompt import Chat

QueryClass = Literal["interactive", "batch"]
QUERY_CLASSES: tuple[QueryClass, ...] = ("interactive", "batch")


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One inference request, as the core hands it to an engine instance."""

    id: int
    query_id: int
    node: str
    stage: str
    workflow: str
    prompt: Tokens
    predicted_output: int
    max_tokens: int
    model: str | None = None  # None: any instance may serve it
    tenant: str = "default"
    priority: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)  # sampling parameters, passed through
    # decode pipelining: the driver reports each complete part (line) of the output as a
    # CallProgress while the call still runs
    streams_parts: bool = False
    # the chat its tokens render (messages, tools): a driver may send it to the engine as
    # a chat request, so the engine applies its own template, grammar and tool parser
    chat: Chat | None = None

    @property
    def input_tokens(self) -> int:
        return len(self.prompt)


@dataclass(frozen=True, slots=True)
class ToolOp:
    """A non-LLM node of a workflow (SQL execution, retrieval, ...), run by the driver."""

    id: int
    query_id: int
    node: str
    stage: str
    op: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkflowRef:
    """The workflow a query runs, as plain data: the name of a factory its driver
    registered with the core (`flowserve.graph.registry.WorkflowRegistry`) and the
    arguments the factory is called with (plain, immutable data: token ids, strings,
    numbers, frozen dataclasses, JSON bytes). The core builds the workflow object from it
    when the query arrives and keeps it in its own books, so events stay plain data and an
    event stream replays into a fresh core."""

    name: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class LatencySLO:
    """Per-request latency objectives of every LLM call of a query (llm-d's predicted-latency
    convention: the `x-slo-ttft-ms` and `x-slo-tpot-ms` headers): time to the first token,
    from when the call is ready, and mean time per output token after it. None: no
    objective on that measure."""

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"LatencySLO.{name}: expected a positive finite number of seconds, got {value!r}")

    def met(self, ttft_s: float | None, tpot_s: float | None) -> bool:
        """Whether a call's measured TTFT and TPOT meet both objectives. A call without a
        first token misses a TTFT objective; one of a single output token has no TPOT,
        which then binds nothing."""
        if self.ttft_s is not None and (ttft_s is None or ttft_s > self.ttft_s + 1e-9):
            return False
        return self.tpot_s is None or tpot_s is None or tpot_s <= self.tpot_s + 1e-9


@dataclass(frozen=True, slots=True)
class Query:
    """One end-to-end application request. `workflow` names it (metrics, predictors);
    `ref` says which workflow it runs (`WorkflowRef`)."""

    id: int
    arrival: float
    workflow: str
    ref: WorkflowRef
    deadline: float | None = None  # absolute time on the events' clock
    tenant: str = "default"
    priority: int = 0
    # "interactive" work has an SLO; "batch" work has none: it fills idle capacity and
    # yields to interactive work (queue policy `flowserve`)
    cls: QueryClass = "interactive"
    slo: LatencySLO | None = None  # per-call TTFT/TPOT objectives (llm-d's SLO headers)

    @property
    def sheddable(self) -> bool:
        """Whether the core may refuse the query early (429) rather than run it to miss its
        objectives: a negative priority (the gateway's `x-priority`), as llm-d and the
        Gateway API Inference Extension mark sheddable requests."""
        return self.priority < 0
