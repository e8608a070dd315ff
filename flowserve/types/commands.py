"""Commands: what the scheduler core asks its driver to do. Plain data; none carries a
function (`RunJob` names a job, and drivers own the registry)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flowserve.errors import FailureKind
from flowserve.types.work import LLMCall, ToolOp

if TYPE_CHECKING:
    from flowserve.graph.nodes import NodeResult
    from flowserve.graph.prompt import Prompt



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
class StepDone:
    """A step of an open-ended query (a program's call) ended — answered, failed or
    cancelled (`result.error`) — for the client that sent it; the query stays open."""

    query_id: int
    key: str
    result: NodeResult


@dataclass(frozen=True, slots=True)
class QueryFailed:
    query_id: int
    time: float
    reason: str  # for people
    kind: FailureKind  # for programs (the gateway's HTTP status)
    results: Mapping[str, NodeResult] = field(default_factory=dict)  # the nodes that ended before it failed


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


Command = (SendCall | CancelCall | RunOp | RunBatch | Tokenize | QueryDone | QueryFailed | StepDone | PolicyChanged
           | RunJob)
