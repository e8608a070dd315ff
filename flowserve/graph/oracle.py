"""What only a simulated (or replayed) run knows: true output lengths and tool outcomes.

A workflow never sees an oracle, nor do policies. The simulator's engines ask it how
many tokens a call really produces; its tool executor how long a tool takes, whether it
fails and what it returns. A live replay asks it for the exact output length to request
(`ignore_eos`) and the tool steps' recorded durations. Keys are the query's node keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    duration_s: float
    error: str | None = None
    value: Any = None  # e.g. modelled output parts (a tuple of Segments)
    output_tokens: int = 0


class Oracle(Protocol):
    def output_tokens(self, key: str) -> int | None: ...

    def tool(self, key: str) -> ToolOutcome | None: ...

    def marks(self, key: str) -> tuple[int, ...]:
        """Where the parts of a splittable output end (cumulative tokens; decode pipelining)."""
        ...


@dataclass(frozen=True)
class TableOracle:
    """An oracle from tables (what a plan or a recorded trace says)."""

    outputs: Mapping[str, int] = field(default_factory=dict)
    tools: Mapping[str, ToolOutcome] = field(default_factory=dict)
    parts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # cumulative tokens at each part's end

    def marks(self, key: str) -> tuple[int, ...]:
        """Where the parts of a splittable output end (decode pipelining)."""
        return self.parts.get(key, ())

    def output_tokens(self, key: str) -> int | None:
        return self.outputs.get(key)

    def tool(self, key: str) -> ToolOutcome | None:
        return self.tools.get(key)


NO_ORACLE = TableOracle()
