"""Hexgen-Text2SQL's local queue (paper §4, Eq. 5–7): `urgency` releases the queued call with
the highest urgency; each call's budget is its share of the query's remaining deadline
(Eq. 5), re-split whenever the query's workflow progresses.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from flowserve.core.policy import QueuePolicy
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.view import ClusterView


def call_budget(remaining_s: float, call_cost: float, remaining_cost: float) -> float:
    """Eq. 5: t_SLO = (T_SLO − τ_elapsed) · t̄_comp(call) / Σ t̄_comp(remaining calls, this one included)."""
    if remaining_cost <= 0.0:
        return remaining_s
    return remaining_s * call_cost / remaining_cost


def urgency(t_comp: float, budget: float, queued_s: float) -> float:
    """Eq. 6: U = t_comp − (t_SLO − τ_queued)."""
    return t_comp - (budget - queued_s)


def mean_t_comp(cs: CallState, instances: Sequence[InstanceState], view: ClusterView) -> float:
    """t̄_comp of Eq. 5: the call's predicted compute time averaged over the instances."""
    if not instances:
        return cs.t_comp
    return sum(view.t_comp(cs, inst) for inst in instances) / len(instances)


def remaining_costs(
    qs: QueryState, view: ClusterView, instances: Sequence[InstanceState],
    cache: dict[tuple[int, int], float] | None = None,
) -> tuple[dict[int, float], list[tuple[float, float]]]:
    """The query's remaining work as instance-averaged costs: its unfinished calls (queued
    or running; by call id) and the calls it still expects to make, as (t̄, expected count)."""
    inflight = {cid: mean_t_comp(cs, instances, view) for cid, cs in qs.inflight.items()}
    expected = []
    workflow = qs.query.workflow
    for est in qs.expected_remaining():
        out = est.output_tokens
        if out is None:
            out = view.predictor.predict(workflow, est.stage)
        key = (est.input_tokens, out)
        cost = cache.get(key) if cache is not None else None
        if cost is None:
            cost = (sum(i.cost.call_time(est.input_tokens, out) for i in instances) / len(instances)
                    if instances else 0.0)
            if cache is not None:
                cache[key] = cost
        expected.append((cost, est.count))
    return inflight, expected


class UrgencyQueue(QueuePolicy):
    """Release the call with the highest urgency U (Eq. 7).

    A call's budget is its Eq. 5 share of the query's remaining deadline, measured from
    the query's latest workflow progression p (a node finished; its arrival before);
    τ_queued counts from max(enqueued, p), so waiting is never charged twice. Between two
    progressions of a query, U − now is constant for each of its calls, so each call's
    key is cached until its query progresses; `select` is one pass over the queue.
    Calls of queries without a deadline are the least urgent, FCFS among themselves.
    """

    name = "urgency"
    uses_deadline = True

    def __init__(self) -> None:
        self._q: dict[int, CallState] = {}
        self._keys: dict[int, tuple[int, float]] = {}  # call id -> (query version, U − now)
        self._factor: dict[int, tuple[int, float]] = {}  # query id -> (version, remaining_s / Σ t̄)
        self._members: dict[int, int] = {}  # query id -> its calls in this queue
        self._est_cost: dict[tuple[int, int], float] = {}

    def push(self, cs: CallState) -> None:
        self._q[cs.id] = cs
        qid = cs.query.id
        self._members[qid] = self._members.get(qid, 0) + 1

    def remove(self, cs: CallState, released: bool) -> None:
        del self._q[cs.id]
        self._keys.pop(cs.id, None)
        qid = cs.query.id
        left = self._members[qid] - 1
        if left:
            self._members[qid] = left
        else:
            del self._members[qid]
            self._factor.pop(qid, None)

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[CallState]:
        return iter(self._q.values())

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        best, best_key = None, -math.inf
        keys = self._keys
        peers: list[InstanceState] | None = None
        for cs in self._q.values():
            version = len(cs.query.run.results)
            entry = keys.get(cs.id)
            if entry is None or entry[0] != version:
                if peers is None:
                    peers = view.up_instances(inst.spec.model)
                entry = (version, self._static_key(cs, version, view, peers))
                keys[cs.id] = entry
            if best is None or entry[1] > best_key:
                best, best_key = cs, entry[1]
        return best

    def urgency_of(self, cs: CallState, view: ClusterView) -> float:
        """U of a queued call now (−inf without a deadline)."""
        budget = self.budget(cs, view)
        if budget is None:
            return -math.inf
        return urgency(cs.t_comp, budget, view.now - max(cs.enqueued, cs.query.progressed))

    def budget(self, cs: CallState, view: ClusterView) -> float | None:
        """t_SLO of the call (Eq. 5), None without a deadline."""
        if cs.query.query.deadline is None:
            return None
        return self._budget(cs, len(cs.query.run.results), view, view.up_instances(cs.call.model))

    def _budget(self, cs: CallState, version: int, view: ClusterView,
                peers: Sequence[InstanceState]) -> float:
        return self._query_factor(cs.query, version, view, peers) * mean_t_comp(cs, peers, view)

    def _query_factor(self, qs: QueryState, version: int, view: ClusterView,
                      peers: Sequence[InstanceState]) -> float:
        """(T_SLO − τ_elapsed) / Σ t̄ of the remaining calls: Eq. 5 without the call's own t̄."""
        cached = self._factor.get(qs.id)
        if cached is not None and cached[0] == version:
            return cached[1]
        inflight, expected = remaining_costs(qs, view, peers, self._est_cost)
        total = sum(inflight.values()) + sum(c * n for c, n in expected)
        remaining = qs.query.deadline - qs.progressed  # type: ignore[operator]
        factor = call_budget(remaining, 1.0, total)
        self._factor[qs.id] = (version, factor)
        return factor

    def _static_key(self, cs: CallState, version: int, view: ClusterView,
                    peers: Sequence[InstanceState]) -> float:
        """U − now = t_comp − t_SLO − max(enqueued, p), constant until the query progresses."""
        qs = cs.query
        if qs.query.deadline is None:
            return -math.inf
        return cs.t_comp - self._budget(cs, version, view, peers) - max(cs.enqueued, qs.progressed)
