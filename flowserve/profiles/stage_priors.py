"""How many calls a query of a workflow still makes, per stage, from finished queries.

For a stage that issued k calls so far, the expected calls still to come are
E[N − k | N ≥ k] over the queries seen (N: that stage's calls in a finished query) —
the mean residual count, which for heavy-tailed programs grows with k, as a long-running
program is likely a long one. `agent_trace` takes the counts from a trace file; the core
learns them online from the open-ended queries (programs) that finish, so the simulator
and the gateway learn the same way.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Mapping, Sequence

from flowserve.graph.nodes import CallEstimate

DEFAULT_WINDOW = 1000  # finished queries remembered per workflow: the priors follow drift


def mean_residual(counts: Sequence[int], k: int) -> float:
    """E[N − k | N ≥ k] over the observed counts N (0 when none reached k)."""
    rest = [n - k for n in counts if n >= k]
    return sum(rest) / len(rest) if rest else 0.0


class StagePriors:
    """Per-stage call counts and prompt sizes of the last `window` finished queries of each
    workflow, and what they predict for a running one (`expected`)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be ≥ 1, got {window}")
        self._window = window
        self._seen: dict[str, deque[dict[str, tuple[int, int]]]] = {}
        self._tables: dict[str, _Residuals] = {}  # built when first asked after a change

    def observe(self, workflow: str, calls: Sequence[tuple[str, int]]) -> None:
        """A finished query's LLM calls as (stage, prompt tokens)."""
        per: dict[str, tuple[int, int]] = {}
        for stage, tokens in calls:
            n, total = per.get(stage, (0, 0))
            per[stage] = (n + 1, total + tokens)
        self._seen.setdefault(workflow, deque(maxlen=self._window)).append(per)
        self._tables.pop(workflow, None)

    def queries(self, workflow: str) -> int:
        return len(self._seen.get(workflow, ()))

    def expected(self, workflow: str, issued: Mapping[str, int]) -> list[CallEstimate]:
        """The calls a query of `workflow` that issued `issued` (per stage) still makes;
        nothing before any query of it finished."""
        seen = self._seen.get(workflow)
        if not seen:
            return []
        table = self._tables.get(workflow)
        if table is None:
            table = self._tables[workflow] = _Residuals(seen)
        out = []
        for stage, (counts, suffix, inputs) in table.stages.items():
            left = residual_from_sorted(counts, suffix, issued.get(stage, 0))
            if left > 1e-9:
                out.append(CallEstimate(stage, round(inputs), None, left))
        return out


def residual_from_sorted(counts: Sequence[int], suffix: Sequence[int], k: int) -> float:
    """`mean_residual` on ascending counts with suffix sums (suffix[i] = Σ counts[i:])."""
    i = bisect_left(counts, k)
    n = len(counts) - i
    return suffix[i] / n - k if n else 0.0


class _Residuals:
    """Sorted counts, their suffix sums and the mean prompt, per stage."""

    def __init__(self, seen: Sequence[Mapping[str, tuple[int, int]]]) -> None:
        stages = {s for q in seen for s in q}
        self.stages: dict[str, tuple[list[int], list[int], float]] = {}
        for s in sorted(stages):
            counts = sorted(q.get(s, (0, 0))[0] for q in seen)
            suffix = [0] * (len(counts) + 1)
            for i in range(len(counts) - 1, -1, -1):
                suffix[i] = suffix[i + 1] + counts[i]
            calls = sum(q[s][0] for q in seen if s in q)
            tokens = sum(q[s][1] for q in seen if s in q)
            self.stages[s] = (counts, suffix, tokens / calls)
