"""What runs a statement's LLM calls: the backend protocol and its answers.

`run` takes one batch (an LLM operator's planned requests) and returns one answer per
request in the same order; `report` says what the statement cost on the cluster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import Request

Progress = Callable[[int, int, int], None]  # (calls done, prompt tokens, cached tokens) increments


@dataclass(frozen=True, slots=True)
class Answer:
    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0


class Backend(Protocol):
    model: str | None

    def run(self, requests: Sequence[Request], stage: str, output: OutputSpec, progress: Progress) -> list[Answer]:
        ...

    def report(self) -> dict[str, Any]:
        """latency_s (the statement's end to end on the cluster), calls, token_hit_rate."""
        ...

    def close(self) -> None: ...
