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

SEGMENT_SPAN = 1 << 20  # token ids of segment s are [s·SPAN, s·SPAN + length)


@dataclass(frozen=True, slots=True)
class Segment:
    id: int
    length: int
    shared: bool = False  # shared segments are materialised once and reused

    def __post_init__(self) -> None:
        assert 0 < self.length < SEGMENT_SPAN, self.length


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
    """Turns segment lists into token tuples, reusing shared segments' tuples."""

    def __init__(self) -> None:
        self._shared: dict[Segment, Tokens] = {}

    def segment(self, seg: Segment) -> Tokens:
        tokens = self._shared.get(seg)
        if tokens is None:
            base = seg.id * SEGMENT_SPAN
            tokens = tuple(range(base, base + seg.length))
            if seg.shared:
                self._shared[seg] = tokens
        return tokens

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out: Tokens = ()
        for seg in segments:
            out += self.segment(seg)
        return out


def standalone_latency(plan: QueryPlan, cost: CostModel) -> float:
    """The query alone on one instance with a cold cache: each step takes its slowest
    item (parallel calls share the batch), steps run one after another."""
    total = 0.0
    for step in plan.steps:
        longest = 0.0
        for item in step:
            if isinstance(item, CallStep):
                t = cost.call_time(item.input_tokens, item.output_tokens)
            else:
                t = item.duration_s
            longest = max(longest, t)
        total += longest
    return total
