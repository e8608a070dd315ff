"""`max_score`: the candidate of the highest total score (llm-d's max-score-picker).

Tie-break: scores within `tolerance` × max(1, |best|) of the best are tied (floating-point
noise must not decide: a profile's sum of normalised scores orders like its costs up to
rounding); among tied candidates the one that was sent the fewest calls
(`dispatched`: spreads new work on an idle cluster), then the first in candidate order.
llm-d breaks ties at random; this one is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Picker

TOLERANCE = 1e-9


def best_index(scores: Sequence[float], dispatched: Sequence[int], tolerance: float = TOLERANCE) -> int:
    """The index of the highest score, ties (module docstring) to the fewest dispatched, then the first."""
    top = max(scores)
    floor = top - tolerance * max(1.0, abs(top))
    return min((k for k, s in enumerate(scores) if s >= floor), key=lambda k: (dispatched[k], k))


class MaxScore(Picker):
    name = "max_score"

    def __init__(self, tolerance: Annotated[float, Help("scores this close to the best (relative) are tied")]
                 = TOLERANCE) -> None:
        if not 0.0 <= tolerance < 1e-3:
            raise ValueError(f"tolerance must be in [0, 1e-3), got {tolerance}")
        self.tolerance = tolerance

    def pick(self, scores: Sequence[float], d: Decision) -> InstanceState:
        cands = d.candidates
        return cands[best_index(scores, [i.dispatched for i in cands], self.tolerance)]
