"""Row errors of a statement, grouped: one entry per reason with its count and a few
example rows, so a statement where 10⁵ rows failed for one reason reports one line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

EXAMPLES = 3
_DETAIL = re.compile(r"'[^']*'|\"[^\"]*\"|\d+(?:\.\d+)?")


def reason_key(reason: str) -> str:
    """The reason without its row-specific details (quoted text, numbers)."""
    return _DETAIL.sub("…", reason)


@dataclass
class ErrorGroup:
    op: str
    reason: str  # the first row's reason
    rows: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, row: str) -> None:
        """Another row failed so (its first EXAMPLES are kept)."""
        self.rows += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(row)


@dataclass
class ErrorLog:
    groups: dict[tuple[str, str], ErrorGroup] = field(default_factory=dict)
    rows: int = 0

    def add(self, op: str, reason: str, row: str) -> None:
        g = self.groups.get((op, reason_key(reason)))
        if g is None:
            g = self.groups[(op, reason_key(reason))] = ErrorGroup(op, reason)
        g.add(row)
        self.rows += 1

    def report(self) -> list[dict[str, Any]]:
        return [{"op": g.op, "reason": g.reason, "rows": g.rows, "examples": g.examples}
                for g in sorted(self.groups.values(), key=lambda g: -g.rows)]
