"""How much a call can afford to trade time for capacity: the weight `w` flowserve's
`uncached_work` scorer and `pin` guard put on cache reuse.

    w = max(slack, pressure)

* slack: the query's (remaining deadline − expected remaining work) / remaining deadline,
  clamped to [0, 1] (`slack_fraction`); batch work (no SLO) takes 1, deadline-free
  interactive work `w_free`;
* pressure (`backlog`): the fraction of candidates with interactive calls waiting, or
  their mean occupancy (slots or KV) — when calls queue everywhere, capacity is what
  every query lacks.

A tight query on a quiet cluster takes the earliest finish (w → 0); one with room to
spare, or any call on a pressed cluster, pays for cache reuse.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.scoring.plugin import Decision
from flowserve.policies.urgency import remaining_costs

MEMO_QUERIES = 4096  # queries whose remaining work is memoised (finished ones are dropped past this)


def slack_fraction(remaining_s: float, remaining_work_s: float) -> float:
    """(T_SLO − τ_elapsed − expected remaining work) / (T_SLO − τ_elapsed), clamped to [0, 1]."""
    if remaining_s <= 0.0:
        return 0.0
    return min(1.0, max(0.0, (remaining_s - remaining_work_s) / remaining_s))


def waiting_interactive(inst: InstanceState) -> int:
    """Calls waiting at the instance that do not yield (a flowserve queue's batch calls do)."""
    q = inst.queue
    return len(q) - q.batch_waiting()


def backlog(candidates: Sequence[InstanceState]) -> float:
    """How pressed the cluster is: the larger of the fraction of instances with calls waiting
    in their queue and the instances' mean occupancy (slots or KV)."""
    if not candidates:
        return 0.0
    waiting = sum(1 for i in candidates if waiting_interactive(i)) / len(candidates)
    return max(waiting, sum(occupancy(i) for i in candidates) / len(candidates))


class SlackBook:
    """Each live query's expected remaining work, memoised until its workflow progresses
    (a part's own memo across decisions: plain caching, no decision depends on it)."""

    __slots__ = ("_est", "_slack", "w_free")

    def __init__(self, w_free: float) -> None:
        if not 0.0 <= w_free <= 1.0:
            raise ValueError(f"w_free must be in [0, 1], got {w_free}")
        self.w_free = w_free
        self._est: dict[tuple[int, int], float] = {}
        self._slack: dict[int, tuple[int, float, float]] = {}  # query id → (version, deadline, work)

    def slack(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> float:
        q = cs.query.query
        if q.cls == "batch":
            return 1.0
        if q.deadline is None:
            return self.w_free
        qs = cs.query
        version = len(qs.run.results)
        memo = self._slack.get(qs.id)
        if memo is None or memo[0] != version:
            inflight, expected = remaining_costs(qs, view, candidates, self._est)
            work = sum(inflight.values()) + sum(c * n for c, n in expected)
            memo = self._slack[qs.id] = (version, q.deadline, work)
            if len(self._slack) > MEMO_QUERIES:
                live = view.queries
                self._slack = {k: v for k, v in self._slack.items() if k in live}
        return slack_fraction(memo[1] - view.now, memo[2])

    def weight(self, d: Decision) -> float:
        """w for this decision, computed once whichever part asks first."""
        return d.once(("w", self.w_free),
                      lambda: max(self.slack(d.call, d.candidates, d.view), backlog(d.candidates)))
