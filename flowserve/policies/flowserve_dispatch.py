"""flowserve's own dispatch and queue policy (SPEC §3.1): `--dispatch flowserve --queue flowserve`.

Dispatch: the predicted completion of the call on each instance plus the capacity it
uses there, weighed by how much slack the query has:

    finish_i = wait_i + slowdown_i + t_comp(call, i)
    score_i  = finish_i + harm_i + efficiency · w · t_cold(fastest) · t_comp(call, i) / t_cold(i)

* `t_comp` is the view's cache-aware estimate (Hexgen Eq. 2 on the instance's hardware,
  minus the prefix the router's index says i caches): hardware speed and prefix reuse in
  one number of seconds; `t_cold` the same with nothing cached;
* `wait_i`, the work ahead (`wait_model="batched"`): prefills go one after the other
  through the engine's token budget while decodes share its batch, so it is the prefill
  seconds of the calls queued at i and still owed by its running calls, plus the running
  batch's mean remaining call weighed by how full the engine is (slots or KV). An
  interactive call does not count the batch calls queued there: they yield to it.
  `wait_model="serial"` uses Hexgen's t_queue (Eq. 3) instead;
* `slowdown_i`: the cost model's longer decode steps in i's running batch for this call;
  `harm_i`: what this call adds to the running calls' decode steps (its externality);
* the last term is the work the call leaves undone by i's cache, in seconds of the fastest
  hardware (so slower GPUs are not penalised for being slower, only for being busy);
  `w` = max(slack fraction, cluster pressure): the query's (remaining deadline − expected
  remaining work) / remaining deadline, clamped to [0, 1], or — when calls queue
  everywhere or engines fill up — the cluster's pressure, since capacity is then what
  every query lacks. A query about to miss its deadline on an idle cluster (w → 0) takes
  the earliest finish; one with room to spare pays for cache reuse. Batch work (no SLO)
  takes w = 1, deadline-free interactive work `w_free`.

Preble's post-assignment rebalancing and hot-prefix replication come out of the score:
the holder of a hot prefix keeps its traffic while its queue costs less than the prefill
it saves elsewhere; past that point the next call goes to a lighter instance, which
computes the prefix once and from then on shares the traffic (the index shows both).
`stats` counts those moves ("replicated": sent away from a holder of more than half the
prompt). On top, Preble's T_hbal guard (`t_hbal`, off by default) caps how far one
instance may run ahead of the lightest.

Queue (`flowserve.policies.flowserve_queue`): interactive before batch. Interactive calls by
Hexgen's urgency (Eq. 5–7), with weighted fair shares across tenants (VTC,
`flowserve.core.tenants`). An engine gets calls only while its running batch stays within
its batching sweet spot (`flowserve.profiles.sweet_spot`); the rest wait in the core, where
that order acts. Batch calls FCFS, released only when no interactive call waits at the
instance, and beside running interactive calls only to a stricter sweet spot, one batch
prefill at a time — so batch fills idle capacity and yields to interactive work.

Calls without a deadline pin their prefix (`_pin`): they stay with an instance holding it
while it finishes them within (1 + w) × the best finish elsewhere.

Defaults were chosen once for every workload of `bench compare` (docs/policies.md), not
per workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.base import DispatchPolicy
from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.preble_costs import overloaded
from flowserve.policies.urgency import remaining_costs

# --------------------------------------------------------------------------- formulas


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


def batch_slowdown(cost, steps: int, own_context: float, running: int, running_context: float) -> float:
    """Extra decode seconds of a call sharing the running batch: steps × (iteration time with
    the batch − alone), the cost model's decode step at batch n + 1 and the summed context."""
    if steps <= 0 or running <= 0:
        return 0.0
    return steps * (cost.decode_step_time(running + 1, running_context + own_context)
                    - cost.decode_step_time(1, own_context))


def externality(cost, steps: int, own_context: float, running: int, running_context: float) -> float:
    """Seconds the call adds to the n running calls together: each decode step of the batch
    gets longer by step(n + 1, C + c) − step(n, C), for about the call's own steps."""
    if steps <= 0 or running <= 0:
        return 0.0
    return running * steps * (cost.decode_step_time(running + 1, running_context + own_context)
                              - cost.decode_step_time(running, running_context))


def slot_wait(excess: int, running: int, mean_call_s: float) -> float:
    """Seconds until a slot frees for a call that finds `excess` calls (itself included)
    beyond what its engine may run: running calls finish one per mean call / running
    seconds in steady state (Little's law), so excess × mean call / running."""
    if excess <= 0 or running <= 0:
        return 0.0
    return excess * mean_call_s / running


def pinned(holder_finish: float, best_finish: float, guard: float) -> bool:
    """Does a call stay with the holder of its prefix? While the holder finishes it within
    `guard` × the best finish elsewhere (SGLang's cache-aware routing and Preble's T_hbal
    bound an instance's lead the same way, by a ratio)."""
    return holder_finish <= guard * best_finish


def completion_score(wait_s: float, t_comp_s: float, cost_s: float) -> float:
    """Predicted completion (wait + own time) plus the capacity the call uses, weighed by the slack."""
    return wait_s + t_comp_s + cost_s


# --------------------------------------------------------------------------- dispatch


class FlowserveDispatch(DispatchPolicy):
    name = "flowserve"
    uses_deadline = True
    needs_prefix_index = True

    def __init__(self, w_free: float = 0.5, t_hbal: float = 0.0, window_s: float = 180.0,
                 wait_model: Literal["serial", "batched"] = "batched", efficiency: float = 3.0,
                 externality: float = 1.0, pin: bool = True) -> None:
        if not 0.0 <= w_free <= 1.0:
            raise ValueError(f"w_free must be in [0, 1], got {w_free}")
        if t_hbal and t_hbal < 1.0:
            raise ValueError(f"t_hbal must be 0 (off) or ≥ 1, got {t_hbal}")
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.w_free = w_free
        self.wait_model = wait_model
        if efficiency < 0:
            raise ValueError(f"efficiency must be ≥ 0, got {efficiency}")
        self.efficiency = efficiency
        if externality < 0:
            raise ValueError(f"externality must be ≥ 0, got {externality}")
        self.externality = externality
        self.t_hbal = t_hbal
        self.pin = pin
        self.prefix_window_s = window_s
        self._est: dict[tuple[int, int], float] = {}
        self._slack: dict[int, tuple[int, float, float]] = {}  # query id → (version, deadline, work)
        self.stats = {"decisions": 0, "pinned": 0, "replicated": 0, "rebalanced": 0}

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
            if len(self._slack) > 4096:  # finished queries: keep the memo small
                live = view.queries
                self._slack = {k: v for k, v in self._slack.items() if k in live}
        return slack_fraction(memo[1] - view.now, memo[2])

    def wait(self, inst: InstanceState, cs: CallState, now: float) -> float:
        """Work ahead of the call: what its queue releases before it (`waiting_before`: batch
        work and tenants ahead on their fair share go after an interactive call). "serial":
        that work and the running calls' t_comp (Hexgen's t_queue); "batched": its prefills
        and the prefill the running calls still owe (prefills go one after the other through
        the token budget), the running batch's mean call weighed by how full the engine is,
        and the wait for a slot where the queue holds calls beyond the sweet spot."""
        queue = inst.queue
        ahead = queue.waiting_before(cs)
        queued = queue.waiting_work_s()
        if self.wait_model == "serial":
            return max(inst.outstanding - queued + ahead.work_s, 0.0)
        w = ahead.prefill_s + queue.running_prefill_s(inst, now)
        n = len(inst.running) + inst.peer_running  # peer replicas' calls share the engine
        if n:
            mean_call = (inst.outstanding - queued) / (n + inst.peer_queued)
            w += mean_call * occupancy(inst)
            limit = queue.batch_limit(inst)
            if limit is not None:
                w += slot_wait(n + ahead.calls + 1 - limit, n, mean_call)
        return max(w, 0.0)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        # slack, or the cluster's backlog: when calls queue everywhere, capacity is what all lack
        w = max(self.slack(cs, candidates, view), backlog(candidates))
        best, best_key = candidates[0], (math.inf, math.inf)
        finish: dict[str, float] = {}
        steps = max(cs.predicted_output - 1, 0)
        own_ctx = cs.input_tokens + cs.predicted_output / 2
        rows = []
        for inst in candidates:
            tc = view.t_comp(cs, inst)
            wait = self.wait(inst, cs, view.now)
            harm = 0.0
            if self.wait_model == "batched" and inst.running:
                n = len(inst.running) + inst.peer_running
                ctx = inst.queue.running_context(inst)
                wait += batch_slowdown(inst.cost, steps, own_ctx, n, ctx)
                harm = self.externality * externality(inst.cost, steps, own_ctx, n, ctx)
            finish[inst.name] = wait + tc
            rows.append((inst, wait + harm, tc))
        colds = [view.t_cold(cs, inst) for inst, _, _ in rows]
        fastest = min(colds)
        for (inst, wait, tc), cold in zip(rows, colds, strict=True):
            share = tc / cold if cold > 0 else 1.0  # the part of the work its cache leaves
            key = (completion_score(wait, tc, self.efficiency * w * fastest * share), inst.dispatched)
            if key < best_key:
                best, best_key = inst, key
        if self.t_hbal and len(candidates) > 1:
            light = min(candidates, key=lambda i: finish[i.name])
            if light is not best and overloaded(finish[best.name], finish[light.name], self.t_hbal):
                best = light
                self.stats["rebalanced"] += 1
        self.stats["decisions"] += 1
        if view.prefix_index is not None and self.pin and cs.query.query.deadline is None:
            best = self._pin(cs, candidates, view, best, finish, w)
        return best

    def _pin(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView,
             best: InstanceState, finish: dict[str, float], w: float) -> InstanceState:
        """Pin before replicate, for calls without a deadline (batch work, deadline-free
        requests: their prefix's instance matters more than a second saved): a call whose
        prompt is mostly cached on some instances goes to the one of them that finishes it
        first, unless that is later than 1 + w times the best finish (`pinned`; w = 1 for
        batch work, `w_free` otherwise): only then is the prefix copied to another instance."""
        holders = [i for i in candidates if view.cached_tokens(cs, i) * 2 > cs.input_tokens]
        if not holders or best in holders:
            return best
        holder = min(holders, key=lambda i: finish[i.name])
        if pinned(finish[holder.name], finish[best.name], 1.0 + w):
            self.stats["pinned"] += 1
            return holder
        self.stats["replicated"] += 1
        return best
