"""flowserve's own dispatch and queue policy (SPEC §3.1): `--dispatch flowserve --queue flowserve`.

Dispatch: the predicted completion of the call on each instance,

    finish_i = wait_i + t_comp(call, i)
    score_i  = finish_i + w · t_comp(call, i),      w = slack fraction ∈ [0, 1]

* `t_comp` is the view's cache-aware estimate (Hexgen Eq. 2 on the instance's hardware,
  minus the prefix the router's index says i caches): hardware speed and prefix reuse in
  one number of seconds;
* `wait_i` is the work queued ahead on i (Hexgen's t_queue, Eq. 3); an interactive call
  does not count the batch calls queued there, since they yield to it;
* `w` weighs the call's own cost by the query's SLO slack: (remaining deadline − expected
  remaining work) / remaining deadline, clamped to [0, 1]. A query about to miss its
  deadline (w → 0) takes the earliest finish; one with room to spare (w → 1) pays more
  for efficiency — a cache hit or the faster GPU — leaving the early slots to tighter
  queries. Batch work (no SLO) takes w = 1, deadline-free interactive work `w_free`.

Preble's post-assignment rebalancing and hot-prefix replication come out of the score:
the holder of a hot prefix keeps its traffic while its queue costs less than the prefill
it saves elsewhere; past that point the next call goes to the lightest instance, which
computes the prefix once and from then on shares the traffic (the index shows both).
`stats` counts those moves ("replicated": sent away from a holder of more than half the
prompt). On top, Preble's T_hbal guard (`t_hbal`) caps how far the finish estimate may
let one instance run ahead of the lightest.

Queue: interactive before batch. Interactive calls by Hexgen's urgency (Eq. 5–7), with
weighted fair shares across tenants (VTC, `flowserve.core.tenants`): when the most urgent
call's tenant is ahead of the least-served backlogged tenant by more than `fair_slack`
weighted tokens, that tenant's most urgent call goes first. Batch calls FCFS, released
only when no interactive call waits at the instance and fewer than `batch_share` of its
sequence slots run batch work — so batch fills idle capacity and yields to interactive.

Defaults were chosen once for every workload (see README "The flowserve policy").
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Literal

from flowserve.core.state import CallState, InstanceState
from flowserve.core.tenants import parse_weights
from flowserve.core.view import ClusterView
from flowserve.policies.base import Dispatch
from flowserve.policies.hexgen import UrgencyQueue, remaining_costs
from flowserve.policies.preble_costs import overloaded


def is_batch(cs: CallState) -> bool:
    return cs.query.query.cls == "batch"


# --------------------------------------------------------------------------- formulas


def slack_fraction(remaining_s: float, remaining_work_s: float) -> float:
    """(T_SLO − τ_elapsed − expected remaining work) / (T_SLO − τ_elapsed), clamped to [0, 1]."""
    if remaining_s <= 0.0:
        return 0.0
    return min(1.0, max(0.0, (remaining_s - remaining_work_s) / remaining_s))


def occupancy(inst: InstanceState) -> float:
    """How full the engine is: the larger of its sequence slots and KV memory in use."""
    slots = len(inst.running) / max(1, inst.spec.engine.max_num_seqs)
    if inst.spec.max_inflight:
        slots = max(slots, len(inst.running) / inst.spec.max_inflight)
    kv = 0.0
    cap = inst.kv_capacity
    if cap and inst.spec.reports_capacity and inst.kv_free < cap:
        kv = 1.0 - max(inst.kv_free, 0) / cap
    return min(1.0, max(slots, kv))


def batch_slowdown(cost, steps: int, own_context: float, running: int, running_context: float) -> float:
    """Extra decode seconds of a call sharing the running batch: steps × (iteration time with
    the batch − alone), the cost model's decode step at batch n + 1 and the summed context."""
    if steps <= 0 or running <= 0:
        return 0.0
    return steps * (cost.decode_step_time(running + 1, running_context + own_context)
                    - cost.decode_step_time(1, own_context))


def completion_score(wait_s: float, t_comp_s: float, slack: float) -> float:
    """Predicted completion (wait + own time) plus the own time weighed by the slack."""
    return wait_s + t_comp_s + slack * t_comp_s


# --------------------------------------------------------------------------- dispatch


class FlowserveDispatch(Dispatch):
    name = "flowserve"
    uses_deadline = True
    needs_prefix_index = True

    def __init__(self, w_free: float = 0.5, t_hbal: float = 0.0, window_s: float = 180.0,
                 wait_model: Literal["serial", "batched"] = "batched", efficiency: float = 3.0) -> None:
        if not 0.0 <= w_free <= 1.0:
            raise ValueError(f"w_free must be in [0, 1], got {w_free}")
        if t_hbal and t_hbal < 1.0:
            raise ValueError(f"t_hbal must be 0 (off) or ≥ 1, got {t_hbal}")
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.w_free = w_free
        self._now = 0.0
        self.wait_model = wait_model
        if efficiency < 0:
            raise ValueError(f"efficiency must be ≥ 0, got {efficiency}")
        self.efficiency = efficiency
        self.t_hbal = t_hbal
        self.prefix_window_s = window_s
        self._est: dict[tuple[int, int], float] = {}
        self._slack: dict[int, tuple[int, float, float]] = {}  # query id → (version, deadline, work)
        self.stats = {"decisions": 0, "replicated": 0, "rebalanced": 0}

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

    def wait(self, inst: InstanceState, batch: bool) -> float:
        """Work ahead of the call. "serial": every queued and running call's t_comp (Hexgen's
        t_queue); "batched": the queued calls' work plus the running batch's mean remaining
        call (running calls share the engine's batch with a new one rather than precede it)."""
        queue = inst.queue
        if self.wait_model == "serial":
            w = inst.outstanding
        else:
            queued = getattr(queue, "queued_work", None)
            prefill = getattr(queue, "queued_prefill", None)
            if queued is None or prefill is None:
                queued = sum(c.t_comp for c in queue)
                prefill = queued
            w = prefill
            pending = getattr(queue, "running_prefill", None)
            if pending is not None:
                w += pending(inst, self._now)
            n = len(inst.running)
            if n:  # the mean running call, weighed by how full the engine is (slots or KV)
                w += (inst.outstanding - queued) / n * occupancy(inst)
            if not batch:
                w -= getattr(queue, "batch_prefill", 0.0)
            return max(w, 0.0)
        if not batch:
            w -= getattr(queue, "batch_work", 0.0)
        return max(w, 0.0)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        batch = is_batch(cs)
        self._now = view.now
        w = self.slack(cs, candidates, view)
        best, best_key = candidates[0], (math.inf, math.inf)
        finish: dict[str, float] = {}
        steps = max(cs.predicted_output - 1, 0)
        own_ctx = cs.input_tokens + cs.predicted_output / 2
        for inst in candidates:
            tc = view.t_comp(cs, inst)
            wait = self.wait(inst, batch)
            if self.wait_model == "batched" and inst.running:
                ctx = sum(c.input_tokens + c.predicted_output / 2 for c in inst.running.values())
                wait += batch_slowdown(inst.cost, steps, own_ctx, len(inst.running), ctx)
            finish[inst.name] = wait + tc
            key = (completion_score(wait, tc, self.efficiency * w), inst.dispatched)
            if key < best_key:
                best, best_key = inst, key
        if self.t_hbal and len(candidates) > 1:
            light = min(candidates, key=lambda i: finish[i.name])
            if light is not best and overloaded(finish[best.name], finish[light.name], self.t_hbal):
                best = light
                self.stats["rebalanced"] += 1
        self.stats["decisions"] += 1
        if view.prefix_index is not None:
            hits = [view.cached_tokens(cs, i) for i in candidates]
            if max(hits) * 2 > cs.input_tokens and view.cached_tokens(cs, best) * 2 <= cs.input_tokens:
                self.stats["replicated"] += 1
        return best


# --------------------------------------------------------------------------- queue


class FlowserveQueue(UrgencyQueue):
    name = "flowserve"
    uses_deadline = True

    def __init__(self, batch_share: float = 0.25, tenant_weights: str = "", fair_slack: float = 4096.0) -> None:
        super().__init__()
        if not 0.0 < batch_share <= 1.0:
            raise ValueError(f"batch_share must be in (0, 1], got {batch_share}")
        if fair_slack < 0:
            raise ValueError(f"fair_slack must be ≥ 0, got {fair_slack}")
        self.batch_share = batch_share
        self.weights = parse_weights(tenant_weights)
        self.fair_slack = fair_slack
        self._batch: OrderedDict[int, CallState] = OrderedDict()
        self.batch_work = 0.0  # Σ t_comp of the batch calls waiting here
        self.queued_work = 0.0  # Σ t_comp of every call waiting here
        self.queued_prefill = 0.0  # Σ prefill seconds of their uncached prompts
        self.batch_prefill = 0.0  # the same for the batch calls
        self._prefill: dict[int, float] = {}
        self._started: dict[int, tuple[float, float]] = {}  # running call → (release time, prefill s)
        self._tenants: dict[str, int] = {}  # interactive calls waiting here per tenant
        self._view: ClusterView | None = None

    def bind(self, view: ClusterView) -> None:
        self._view = view
        if self.weights:
            view.tenants.weights.update(self.weights)

    def push(self, cs: CallState) -> None:
        self.queued_work += cs.t_comp
        pf = self._prefill_s(cs)
        self._prefill[cs.id] = pf
        self.queued_prefill += pf
        if is_batch(cs):
            self._batch[cs.id] = cs
            self.batch_work += cs.t_comp
            self.batch_prefill += pf
            return
        tenant = cs.query.query.tenant
        if tenant not in self._tenants and self._view is not None:
            self._view.tenants.lift(tenant, self._tenants)
        self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        super().push(cs)

    def running_prefill(self, inst: InstanceState, now: float) -> float:
        """Prefill seconds the running calls still owe (prefills share the token budget:
        they go one after the other, while decodes share the batch)."""
        total = 0.0
        gone = []
        for cid, (start, pf) in self._started.items():
            if cid not in inst.running:
                gone.append(cid)
            else:
                total += max(0.0, pf - (now - start))
        for cid in gone:
            del self._started[cid]
        return total

    def remove(self, cs: CallState, released: bool) -> None:
        last = len(self) <= 1
        self.queued_work = 0.0 if last else max(0.0, self.queued_work - cs.t_comp)
        pf = self._prefill.pop(cs.id, 0.0)
        if released and pf > 0 and self._view is not None:
            self._started[cs.id] = (self._view.now, pf)
        self.queued_prefill = 0.0 if last else max(0.0, self.queued_prefill - pf)
        if cs.id in self._batch:
            del self._batch[cs.id]
            self.batch_work = max(0.0, self.batch_work - cs.t_comp) if self._batch else 0.0
            self.batch_prefill = max(0.0, self.batch_prefill - pf) if self._batch else 0.0
            return
        super().remove(cs, released)
        tenant = cs.query.query.tenant
        left = self._tenants[tenant] - 1
        if left:
            self._tenants[tenant] = left
        else:
            del self._tenants[tenant]

    def _prefill_s(self, cs: CallState) -> float:
        """Seconds the call's uncached prompt holds the engine's token budget."""
        view = self._view
        inst = view.instances.get(cs.instance or "") if view is not None else None
        if inst is None:
            return cs.t_comp
        uncached = cs.input_tokens - view.cached_tokens(cs, inst)
        return inst.cost.prefill_time(uncached, cs.input_tokens - uncached) if uncached > 0 else 0.0

    def __len__(self) -> int:
        return len(self._q) + len(self._batch)

    def __iter__(self) -> Iterator[CallState]:
        yield from self._q.values()
        yield from self._batch.values()

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        if self._q:
            if len(self._tenants) > 1:
                return self._fair_select(inst, view)
            return super().select(inst, view)
        if not self._batch:
            return None
        cap = max(1, int(self.batch_share * inst.spec.engine.max_num_seqs))
        if inst.spec.max_inflight is not None:
            cap = min(cap, max(1, int(self.batch_share * inst.spec.max_inflight)))
        running_batch = sum(1 for c in inst.running.values() if is_batch(c))
        if running_batch >= cap:
            return None
        return next(iter(self._batch.values()))

    def _fair_select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        """The most urgent call, unless its tenant is more than fair_slack weighted tokens
        ahead of the least-served backlogged tenant: then that tenant's most urgent call."""
        top = super().select(inst, view)
        assert top is not None
        ledger = view.tenants
        poorest = min(self._tenants, key=ledger.counter)
        if ledger.counter(top.query.query.tenant) - ledger.counter(poorest) <= self.fair_slack:
            return top
        best, best_key = None, -math.inf
        for cs in self._q.values():
            if cs.query.query.tenant != poorest:
                continue
            entry = self._keys.get(cs.id)
            key = entry[1] if entry is not None else -math.inf
            if best is None or key > best_key:
                best, best_key = cs, key
        return best or top
