"""Minimum SLO scale of a policy, with as few simulations as the policy allows.

A deadline-blind policy gives its whole attainment curve from one run. A deadline-aware
one needs a run per scale; since attainment grows with the scale, the smallest grid scale
reaching a target is found by bisection over the grid (about log2(grid) runs per
target; from a hint, by galloping then bisection: 2–4 runs), and the scale is
interpolated between that grid point and the one below it — both are always among the
runs — exactly as `metrics.min_slo_scale` does on a full grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flowserve.metrics.summary import attainment, min_slo_scale
from flowserve.sim.simulator import SimResult

GRID = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 15.0, 20.0,
        25.0, 30.0, 40.0, 50.0, 60.0, 80.0, 100.0)


class ScaleSearch:
    """Attainment at grid scales for one policy; `run(scale)` simulates (None: deadline-blind)."""

    def __init__(self, run: Callable[[float | None], SimResult], aware: bool,
                 grid: Sequence[float] = GRID) -> None:
        assert list(grid) == sorted(grid) and grid
        self._run = run
        self.aware = aware
        self.grid = tuple(grid)
        self.runs: dict[float, SimResult] = {}
        self._blind: SimResult | None = None

    def result(self, scale: float) -> SimResult:
        if not self.aware:
            if self._blind is None:
                self._blind = self._run(None)
            return self._blind
        if scale not in self.runs:
            self.runs[scale] = self._run(scale)
        return self.runs[scale]

    def attainment(self, i: int) -> float:
        s = self.grid[i]
        return attainment(self.result(s), s, self.aware)

    def min_scale(self, target: float, hint: float | None = None) -> float | None:
        """Smallest scale reaching `target` (None: not even the largest grid scale does).

        `hint` (e.g. a similar policy's answer) starts a galloping search there, which
        usually needs 2–3 runs instead of a bisection over the whole grid."""
        n = len(self.grid)
        lo, hi = -1, n - 1  # invariant: attainment(lo) < target (lo = −1: by definition)
        if hint is None:
            if self.attainment(hi) < target:
                return None
        else:
            i = min(range(n), key=lambda k: abs(self.grid[k] - hint))
            step = 1
            if self.attainment(i) >= target:
                hi = i
                while True:  # gallop down to a scale that misses the target
                    j = hi - step
                    if j < 0:
                        break
                    if self.attainment(j) < target:
                        lo = j
                        break
                    hi, step = j, step * 2
            else:
                lo = i
                while True:  # gallop up to a scale that reaches it
                    j = min(lo + step, n - 1)
                    if self.attainment(j) >= target:
                        hi = j
                        break
                    if j == n - 1:
                        return None
                    lo, step = j, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.attainment(mid) >= target:
                hi = mid
            else:
                lo = mid
        return min_slo_scale(self.curve(), target)

    def curve(self) -> list[dict[str, float]]:
        """Attainment at every grid scale run so far (all of them when deadline-blind)."""
        scales = self.grid if not self.aware else sorted(self.runs)
        return [{"scale": s, "attainment": attainment(self.result(s), s, self.aware)} for s in scales]

    @property
    def simulations(self) -> int:
        return len(self.runs) if self.aware else int(self._blind is not None)

    def loosest(self) -> SimResult:
        """The run at the largest grid scale: latency and throughput figures of every
        policy come from it, so they are comparable."""
        return self.result(self.grid[-1])

    def summary(self, hint95: float | None = None, hint99: float | None = None) -> dict[str, Any]:
        m95 = self.min_scale(0.95, hint95)
        m99 = self.min_scale(0.99, hint99 if hint99 is not None else m95)
        return {"min_slo_scale": {"0.95": m95, "0.99": m99}, "slo_attainment": self.curve(),
                "simulations": self.simulations}
