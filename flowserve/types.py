"""Core vocabulary: calls, queries, instances, and the events/commands of the sans-IO core.

Every event carries its own timestamp (seconds on the driver's clock: virtual time in
the simulator, monotonic time in the live gateway); the core never reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from flowserve.graph.program import WorkflowProgram
    from flowserve.profiles.fitted import FittedCostModel
    from flowserve.profiles.models import ModelSpec

Tokens = tuple[int, ...]


# --------------------------------------------------------------------------- work items


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
    # Ground truth for simulated engines only; policies must use `predicted_output`.
    sim_output: int | None = None
    # Driver-specific request body (live: the OpenAI request); opaque to the core.
    payload: Any = None

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
    sim_duration: float = 0.0
    sim_error: bool = False


@dataclass(frozen=True, slots=True)
class Query:
    """One end-to-end application request. `program` is the query's own workflow logic."""

    id: int
    arrival: float
    workflow: str
    program: WorkflowProgram
    deadline: float | None = None  # absolute time on the events' clock
    tenant: str = "default"
    priority: int = 0


@dataclass(frozen=True, slots=True)
class EngineParams:
    """What a vLLM/SGLang-like engine is configured with (the simulator models it)."""

    max_num_seqs: int = 256
    token_budget: int = 2048  # per-iteration token budget (chunked prefill)
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool = True


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str
    gpu: str
    model: str
    tp: int = 1
    max_inflight: int | None = None
    engine: EngineParams = field(default_factory=EngineParams)
    backend: Literal["sim", "openai"] = "sim"
    url: str | None = None
    # A model outside the catalog: its declared architecture (for the roofline) and/or a
    # fitted profile (`flowserve profile`), which then replaces the roofline.
    model_spec: ModelSpec | None = None
    profile: FittedCostModel | None = None


# --------------------------------------------------------------------------- events


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
    text: str | None = None


@dataclass(frozen=True, slots=True)
class CallFailed:
    time: float
    call_id: int
    instance: str
    reason: str
    retryable: bool = True


@dataclass(frozen=True, slots=True)
class OpFinished:
    time: float
    op_id: int
    error: str | None = None
    result: Any = None


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
class JobFinished:
    """A `RunJob` the driver ran (off the event path) has finished."""

    time: float
    job_id: int
    result: Any = None
    error: str | None = None


Event = (
    QueryArrived
    | CallFinished
    | CallFailed
    | OpFinished
    | InstanceUp
    | InstanceDown
    | InstanceCapacity
    | PrefixEvicted
    | Tick
    | JobFinished
)


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class SendCall:
    call: LLMCall
    instance: str


@dataclass(frozen=True, slots=True)
class CancelCall:
    call_id: int
    instance: str


@dataclass(frozen=True, slots=True)
class RunOp:
    op: ToolOp


@dataclass(frozen=True, slots=True)
class QueryDone:
    query_id: int
    time: float
    latency: float
    deadline_met: bool | None
    outputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueryFailed:
    query_id: int
    time: float
    reason: str


@dataclass(frozen=True, slots=True)
class PolicyChanged:
    """A policy changed its own parameters (e.g. the α tuner adopted a new α)."""

    time: float
    policy: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RunJob:
    """Ask the driver to run a pure CPU job, e.g. an α sweep in the simulator, and answer
    with JobFinished. The simulator runs it at once; the live gateway in a worker, so
    serving never waits for it."""

    job_id: int
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


Command = SendCall | CancelCall | RunOp | QueryDone | QueryFailed | PolicyChanged | RunJob
