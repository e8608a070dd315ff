"""Query plans: what a simulated (or replayed) query will do, step by step.

A plan is a chain of steps; the items of one step run in parallel. Prompts are
sequences of segments, each standing for a run of distinct token ids, so the sharing
structure of prompts (a schema shared by a database's queries, a system prompt shared
by all) is explicit, cheap to materialise and serialisable into trace files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.profiles.cost_model import CostModel
from flowserve.types import Tokens

MAX_SEGMENT = 1 << 18  # tokens in one segment


@dataclass(frozen=True, slots=True)
class Segment:
    id: int
    length: int

    def __post_init__(self) -> None:
        assert 0 < self.length <= MAX_SEGMENT, self.length


@dataclass(frozen=True, slots=True)
class CallStep:
    stage: str
    prompt: tuple[Segment, ...]
    output_tokens: int

    @property
    def input_tokens(self) -> int:
        return sum(s.length for s in self.prompt)


@dataclass(frozen=True, slots=True)
class OpStep:
    stage: str
    op: str
    duration_s: float
    error: bool = False


Step = tuple[CallStep | OpStep, ...]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    workflow: str
    steps: tuple[Step, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def calls(self) -> list[CallStep]:
        return [item for step in self.steps for item in step if isinstance(item, CallStep)]


class Materializer:
    """Turns segment lists into token tuples.

    Segment s is the token −(s+1) followed by the first length−1 tokens of a fixed pool
    (0, 1, 2, ...). Two segments are equal exactly when their ids (and lengths) are, a
    shorter segment of the same id is a prefix of the longer one, and prompts diverge at
    the first token of the first differing segment — which is all prefix matching can
    observe. Building a prompt is then a few tuple slices, not an int per token.
    """

    def __init__(self) -> None:
        self._pool = tuple(range(MAX_SEGMENT))

    def segment(self, seg: Segment) -> Tokens:
        return (-(seg.id + 1),) + self._pool[: seg.length - 1]

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out: Tokens = ()
        for seg in segments:
            out += (-(seg.id + 1),) + self._pool[: seg.length - 1]
        return out


def standalone_latency(plan: QueryPlan, cost: CostModel) -> float:
    """The query alone on one instance with a cold cache: each step takes its slowest
    item (parallel calls share the batch), steps run one after another."""
    total = 0.0
    for step in plan.steps:
        total += max(
            cost.call_time(item.input_tokens, item.output_tokens) if isinstance(item, CallStep)
            else item.duration_s
            for item in step
        )
    return total
