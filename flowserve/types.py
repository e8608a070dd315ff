"""Core vocabulary: calls, queries, instances, and the events/commands of the sans-IO core.

Every event carries its own timestamp (seconds on the driver's clock: virtual time in
the simulator, monotonic time in the live gateway); the core never reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from flowserve.graph.nodes import NodeResult
    from flowserve.graph.prompt import Prompt
    from flowserve.graph.workflow import Workflow
    from flowserve.profiles.fitted import FittedCostModel
    from flowserve.profiles.models import ModelSpec
    from flowserve.profiles.ops import OpProfile

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
    params: Mapping[str, Any] = field(default_factory=dict)  # sampling parameters, passed through
    # decode pipelining: the driver reports each complete part (line) of the output as a
    # CallProgress while the call still runs
    streams_parts: bool = False

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
class Query:
    """One end-to-end application request. `workflow` names it (metrics, predictors);
    `program` is its own workflow object (`flowserve.graph.workflow.Workflow`)."""

    id: int
    arrival: float
    workflow: str
    program: Workflow
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
    # The driver reports the engine's admission state (InstanceCapacity) after each change;
    # otherwise the core releases up to `max_inflight` calls.
    reports_capacity: bool = False
    # A model outside the catalog: its declared architecture (for the roofline) and/or a
    # fitted profile (`flowserve profile`), which then replaces the roofline.
    model_spec: ModelSpec | None = None
    profile: FittedCostModel | None = None
    # "llm", or a non-LLM engine (embedding, reranker, vector_db, search) that runs the
    # batchable ops of its kind with this cost profile (`flowserve.graph.primitives`)
    kind: str = "llm"
    op_profile: OpProfile | None = None


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
    text: str | None = None  # the answer (live engines)
    finish_reason: str | None = None
    prompt_tokens: int = 0  # as the engine counted them (0: unknown)


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


@dataclass(frozen=True, slots=True)
class OpFinished:
    time: float
    op_id: int
    error: str | None = None
    result: Any = None
    output_tokens: int = 0  # modelled size of the result (simulated tools)


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
    | CallProgress
    | CallFailed
    | OpFinished
    | InstanceUp
    | InstanceDown
    | InstanceCapacity
    | PrefixEvicted
    | Tick
    | Tokenized
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
class RunBatch:
    """Run these ops (possibly of many queries) as one batch on a non-LLM engine
    instance; answer with one OpFinished per op."""

    instance: str
    ops: tuple[ToolOp, ...]


@dataclass(frozen=True, slots=True)
class Tokenize:
    """Ask the driver for the token ids of a prompt it must tokenize itself (text parts
    without a tokenizer the core can call): answer with `Tokenized`."""

    call_id: int
    query_id: int
    prompt: Prompt
    model: str | None


@dataclass(frozen=True, slots=True)
class QueryDone:
    query_id: int
    time: float
    latency: float
    deadline_met: bool | None
    output: Mapping[str, Any] = field(default_factory=dict)  # the workflow's answer
    results: Mapping[str, NodeResult] = field(default_factory=dict)  # every node's, by key


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
    """Ask the driver to run a pure CPU job by name (its registry maps names to functions,
    e.g. "alpha_sweep"), with plain-data arguments, and answer with JobFinished. The
    simulator runs it at once; the live gateway in a worker, so serving never waits."""

    job_id: int
    name: str
    args: tuple[Any, ...] = ()


Command = SendCall | CancelCall | RunOp | RunBatch | Tokenize | QueryDone | QueryFailed | PolicyChanged | RunJob
