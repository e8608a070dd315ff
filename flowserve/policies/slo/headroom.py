"""SLO headroom: how much of a request's TTFT and TPOT objectives a predicted latency uses,
as a score in [0, 1], and the admission rule on it.

For a call with objectives S_ttft, S_tpot (`LatencySLO`; a missing one does not count) and
predicted latencies P_ttft, P_tpot on an instance, the *load* is the larger share used,

    r = max(P_ttft / S_ttft, P_tpot / S_tpot)        (r ≤ 1: both objectives predicted met)

and the headroom score is

    h = 1 / (1 + r)        ∈ (0, 1];  h ≥ 1/2 exactly when both objectives are predicted met.

It decreases with the predicted latency on both sides of the objective, so a picker that
takes the largest h also takes the least violation when no instance meets the objectives
(llm-d's scorer ranks its "negative headroom" pods by their deficit the same way). A call
without objectives scores 1 everywhere: the term then changes no decision.

Admission: a sheddable call is refused when no candidate's load is within its objectives
(`admits`): queued, it would only miss them and take capacity from calls that can meet theirs.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.types.work import LatencySLO


def slo_load(ttft_s: float, tpot_s: float, slo: LatencySLO) -> float:
    """r = max(P_ttft / S_ttft, P_tpot / S_tpot) over the objectives the SLO sets (0 for none)."""
    r = 0.0
    if slo.ttft_s is not None:
        r = max(r, ttft_s / slo.ttft_s)
    if slo.tpot_s is not None:
        r = max(r, tpot_s / slo.tpot_s)
    return r


def headroom_score(load: float) -> float:
    """h = 1 / (1 + r): 1 for an instant answer, 1/2 at the objective, → 0 beyond it."""
    return 1.0 / (1.0 + max(load, 0.0))


def admits(loads: Sequence[float], margin: float = 1.0) -> bool:
    """Whether some candidate is predicted to meet the objectives: a load ≤ `margin`."""
    return any(r <= margin for r in loads)
