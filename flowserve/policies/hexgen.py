"""Hexgen-Text2SQL scheduling (paper §4): workload-balanced dispatch and urgency queues.

`hexgen_wb` sends each ready call to the instance with the highest Eq. 4 score, trading
the instance's queued work (`t_queue`, Eq. 3: Σ predicted t_comp of the calls queued or
running there, removed when they finish or fail) against the call's own predicted
compute time there (`t_comp`, Eq. 2). With `alpha_tuning` on, α is tuned online by
replaying the recorded trace in the simulator (§4.3, `flowserve.tune`).

`urgency` releases the queued call with the highest urgency (Eq. 6–7); each call's
budget is its share of the query's remaining deadline (Eq. 5), re-split whenever the
query's workflow progresses.

β (seconds²) scales the queue term against the compute term; only (1−α)·β/α matters to
the choice. Like the paper, β is fixed by trial: with β = 50 s² the best fixed α on the
default workloads (Hetero-1/2, CHESS traces, 0.5–1 q/s, both engine settings of `bench
hexgen`) lies mid-range, 0.4–0.8, and α = 0.5 is the default. There both terms decide:
for short calls (Δt_comp across GPUs ≈ 0.1–0.3 s) the queue term's spread is of the same
size, so they are balanced by load; long calls (candidates, Δt_comp ≈ 17 s) go to the
fast GPUs unless those are far more loaded. (Balancing the two terms' median spreads
over all decisions instead would give β ≈ 550 s²; its best α is ≈ 0.9, the same
trade-off at the grid's edge, where the tuner resolves it worse.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Protocol

from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.view import ClusterView
from flowserve.policies.base import Dispatch
from flowserve.types.commands import Command
from flowserve.types.events import Event


class AlphaTuner(Protocol):
    """Online α tuning (Hexgen §4.3; `flowserve.tune.online.OnlineAlphaTuner`)."""

    def observe(self, event: Event, view: ClusterView, policy: HexgenWB) -> tuple[Sequence[Command], float | None]:
        """Commands to issue and the α to adopt now (None: keep the current one)."""
        ...


DEFAULT_ALPHA = 0.5
DEFAULT_BETA = 50.0  # s²; see the module docstring and README "Hexgen-Text2SQL"


# --------------------------------------------------------------------------- formulas


def hexgen_score(t_queue: float, t_comp: float, alpha: float, beta: float) -> float:
    """Eq. 4: (1−α)·β/t_queue − α·t_comp; an idle instance (t_queue = 0) is best on the queue term."""
    if alpha >= 1.0:
        return -t_comp
    queue_term = math.inf if t_queue <= 0.0 else (1.0 - alpha) * beta / t_queue
    return queue_term - alpha * t_comp


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


# --------------------------------------------------------------------------- dispatch


class HexgenWB(Dispatch):
    """Workload-balanced dispatch (Eq. 2–4), optionally with online α tuning (§4.3).

    With alpha_tuning on, α starts at 0 for the first window (`window_s`), then takes
    the value the simulator sweep of that window's trace finds best; a later window
    whose latencies are significantly worse than the previous window's (one-sided Welch
    t-test, p < p_value) triggers a re-tune on that window's trace.
    """

    name = "hexgen_wb"

    def __init__(self, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA,
                 alpha_tuning: bool = False, window_s: float = 100.0, p_value: float = 0.01) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if not beta > 0:
            raise ValueError(f"beta must be positive, got {beta}")
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if not 0 < p_value < 1:
            raise ValueError(f"p_value must be in (0, 1), got {p_value}")
        self.alpha = alpha
        self.beta = beta
        self.alpha_tuning = alpha_tuning
        self.window_s = window_s
        self.p_value = p_value
        self.tuner: AlphaTuner | None = None  # handed in by the driver (`attach_tuner`)
        # Benchmarks set a list here to get (stage, chosen, [(instance, t_queue, t_comp)]).
        self.log: list[tuple[str, str, list[tuple[str, float, float]]]] | None = None
        if alpha_tuning:
            self.alpha = 0.0  # §4.3: the first window runs with α = 0 while it is recorded
            self.tick_s = window_s

    def attach_tuner(self, tuner: AlphaTuner) -> None:
        """The driver hands over the online tuner (it replays traces in the simulator,
        which policies must not import)."""
        self.tuner = tuner

    @staticmethod
    def t_queue(inst: InstanceState) -> float:
        """Eq. 3; exactly 0 when nothing is queued or running (no float residue)."""
        return inst.outstanding if inst.running or len(inst.queue) else 0.0

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        alpha, beta = self.alpha, self.beta
        best, best_key = candidates[0], (-math.inf, -math.inf, -math.inf)
        terms = [] if self.log is not None else None
        for inst in candidates:
            tq = self.t_queue(inst)
            tc = view.t_comp(cs, inst)
            # equal scores (idle instances; α = 1 across identical GPUs): faster, then less loaded
            key = (hexgen_score(tq, tc, alpha, beta), -tc, -tq)
            if key > best_key:
                best, best_key = inst, key
            if terms is not None:
                terms.append((inst.name, tq, tc))
        if self.log is not None and terms is not None:
            self.log.append((cs.call.stage, best.name, terms))
        return best

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        if self.tuner is None:
            assert not self.alpha_tuning, "alpha_tuning is on but no driver attached a tuner"
            return ()
        commands, alpha = self.tuner.observe(event, view, self)
        if alpha is not None:
            self.alpha = alpha
        return commands


# --------------------------------------------------------------------------- local queue


class UrgencyQueue:
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
