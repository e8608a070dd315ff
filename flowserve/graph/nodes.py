"""Nodes of a query's workflow graph and what finishing one yields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.types import Tokens


@dataclass(frozen=True, slots=True)
class LLMNode:
    key: str
    stage: str
    prompt: Tokens
    max_tokens: int
    deps: tuple[str, ...] = ()
    model: str | None = None
    sim_output: int | None = None
    payload: Any = None


@dataclass(frozen=True, slots=True)
class OpNode:
    key: str
    stage: str
    op: str
    deps: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    sim_duration: float = 0.0
    sim_error: bool = False


Node = LLMNode | OpNode


@dataclass(frozen=True, slots=True)
class NodeResult:
    output_tokens: int = 0
    text: str | None = None
    error: str | None = None
    value: Any = None


@dataclass(frozen=True, slots=True)
class CallEstimate:
    """An LLM call a query is still expected to make (not yet in its graph)."""

    stage: str
    input_tokens: int
    output_tokens: int | None = None  # None: ask the output predictor
    count: float = 1.0
