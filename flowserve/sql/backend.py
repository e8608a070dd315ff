"""What runs a statement's LLM calls: the backend protocol and its answers.

`run` takes one batch (an LLM operator's planned requests) and returns one answer per
request in the same order; `report` says what the statement cost on the cluster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowserve.sql.estimate import token_hit_rate
from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import Request
from flowserve.types.specs import InstanceSpec

Progress = Callable[[int, int, int], None]  # (calls done, prompt tokens, cached tokens) increments


@dataclass(frozen=True, slots=True)
class Answer:
    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0


class SQLBackend(Protocol):
    model: str | None
    cluster: tuple[InstanceSpec, ...] | None  # the instances it runs on (None: unknown, a gateway's)

    def run(self, requests: Sequence[Request], stage: str, output: OutputSpec, progress: Progress) -> list[Answer]:
        ...

    def begin_statement(self) -> None:
        """A statement starts: `report` counts its calls and time alone (a reused connection)."""
        ...

    def report(self) -> dict[str, Any]:
        """latency_s (the statement's end to end on the cluster), calls, token_hit_rate."""
        ...

    def close(self) -> None: ...


def usage_report(t0: float | None, t1: float, calls: int, prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """`report()` of a backend that counts engine-reported usage itself (gateway, live)."""
    return {"latency_s": 0.0 if t0 is None else t1 - t0, "calls": calls, "prompt_tokens": prompt_tokens,
            "cached_tokens": cached_tokens, "token_hit_rate": token_hit_rate(cached_tokens, prompt_tokens)}
