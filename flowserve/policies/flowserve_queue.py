"""flowserve's queue policy (`--queue flowserve`; the design is in `flowserve.policies.flowserve_dispatch`):
interactive calls by Hexgen urgency with VTC weighted fair shares across tenants (the
core keeps the accounts, weighted by this policy's `tenant_weights`), batch calls as
capped FCFS filler. Interactive calls without a deadline come after those with one,
least attained service of their query first (a program's engine seconds so far,
Autellix's PLAS), so short programs are not held behind long ones. It also keeps the
per-instance sums dispatch policies may read (`QueuePolicy.waiting_work_s` and the rest:
work and prefill waiting, prefill still owed by running calls)."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence

from flowserve.core.state import CallState, InstanceState, replica_share
from flowserve.core.tenants import parse_weights
from flowserve.core.view import ClusterView
from flowserve.policies.queue_books import Ahead, RunningBook, WaitingTally
from flowserve.policies.urgency import UrgencyQueue
from flowserve.profiles.sweet_spot import DEFAULT_GAIN, SweetSpots

NO_DEADLINE = -1e18  # the urgency key of calls without a deadline, before their attained service


def is_batch(cs: CallState) -> bool:
    return cs.query.query.cls == "batch"


def _group(cs: CallState) -> str | None:
    """The tally group of a waiting call: its tenant, or None for batch work."""
    return None if is_batch(cs) else cs.query.query.tenant


def batch_gap(prefill_s: float, share: float) -> float:
    """Seconds before the next batch call may start beside interactive calls: a prefill
    stalls their decode steps (chunked prefill shares the iterations), so spacing batch
    prefills by prefill / share keeps them to at most `share` of the engine's time (1:
    one batch prefill at a time)."""
    return prefill_s / share


def entitled_slots(weight: float, active_weights: float, spot: int) -> float:
    """A tenant's weighted share of the engine's sweet spot among the tenants with calls
    running or waiting there: spot × w / Σ w (weighted fair queueing's share, in slots)."""
    return spot * weight / active_weights if active_weights > 0 else float(spot)


def engine_slots(inst: InstanceState) -> int:
    """The sequences the engine may run at once: its slots, or `max_inflight` if fewer."""
    slots = inst.spec.engine.max_num_seqs
    return min(slots, inst.spec.max_inflight) if inst.spec.max_inflight else slots


def occupancy(inst: InstanceState) -> float:
    """How full the engine is: the larger of its sequence slots and KV memory in use."""
    slots = (len(inst.running) + inst.peer_running) / max(1, engine_slots(inst))  # peer replicas' calls too
    kv = 0.0
    cap = inst.kv_capacity
    if cap and inst.spec.reports_capacity and inst.kv_free < cap:
        kv = 1.0 - max(inst.kv_free, 0) / cap
    return min(1.0, max(slots, kv))


class FlowserveQueue(UrgencyQueue):
    name = "flowserve"
    uses_deadline = True

    def __init__(self, tenant_weights: str | Mapping[str, float] = "", fair_slack: float = 4096.0,
                 gain: float = DEFAULT_GAIN, batch_share: float = 1.0,
                 batch_gain: float = 0.8, tenant_memory_s: float = 30.0, reserve: bool = False) -> None:
        super().__init__()
        if fair_slack < 0:
            raise ValueError(f"fair_slack must be ≥ 0, got {fair_slack}")
        self.tenant_weights = parse_weights(tenant_weights)  # the core's VTC accounts use them
        self.fair_slack = fair_slack
        self.gain = gain
        if not 0.0 < batch_share <= 1.0:
            raise ValueError(f"batch_share must be in (0, 1], got {batch_share}")
        self.batch_share = batch_share
        self.batch_gain = batch_gain
        if tenant_memory_s < 0:
            raise ValueError(f"tenant_memory_s must be ≥ 0, got {tenant_memory_s}")
        self.tenant_memory_s = tenant_memory_s
        self.reserve = reserve
        self._seen: dict[str, float] = {}  # tenant → when its last call was released here
        self._over: set[str] = set()  # the tenants over their share at the last `select` (`_over_share`)
        self._beside_spots = SweetSpots(batch_gain)
        self._spots = SweetSpots(gain)  # raises on a gain outside [0, 1]
        self._batch: OrderedDict[int, CallState] = OrderedDict()
        self._tally = WaitingTally()  # per tenant's interactive calls, and the batch calls (None)
        self._prefill: dict[int, float] = {}  # waiting call → prefill seconds
        self._running = RunningBook()
        self._next_batch = -math.inf  # when batch work may start its next call beside interactive ones
        self._batch_pick: int | None = None  # the batch call `select` named last
        self._view: ClusterView | None = None

    def bind(self, view: ClusterView) -> None:
        self._view = view

    def push(self, cs: CallState) -> None:
        pf = self._prefill[cs.id] = self._prefill_s(cs)
        self._tally.add(_group(cs), cs.t_comp, pf)
        if is_batch(cs):
            self._batch[cs.id] = cs
            return
        super().push(cs)

    def running_prefill_s(self, inst: InstanceState, now: float) -> float:
        """Prefill seconds the running calls still owe (prefills share the token budget:
        they go one after the other, while decodes share the batch)."""
        self._running.sync(inst)
        return self._running.prefill_owed_s(now)

    def remove(self, cs: CallState, released: bool) -> None:
        pf = self._prefill.pop(cs.id, 0.0)
        self._tally.remove(_group(cs), cs.t_comp, pf)
        view = self._view
        if released and view is not None:
            inst = view.instances.get(cs.instance or "")
            if inst is not None:
                self._running.sync(inst)
            self._running.start(cs, view.now, pf)
            if not is_batch(cs):
                self._seen[cs.query.query.tenant] = view.now
            if cs.id == self._batch_pick:
                self._next_batch = view.now + batch_gap(pf, self.batch_share)
        if cs.id in self._batch:
            del self._batch[cs.id]
            return
        super().remove(cs, released)

    def _prefill_s(self, cs: CallState) -> float:
        """Seconds the call's uncached prompt holds the engine's token budget."""
        view = self._view
        inst = view.instances.get(cs.instance or "") if view is not None else None
        if inst is None:
            return cs.t_comp
        uncached = cs.input_tokens - view.cached_tokens(cs, inst)
        return inst.cost.prefill_time(uncached, cs.input_tokens - uncached) if uncached > 0 else 0.0

    def waiting_work_s(self) -> float:
        return self._tally.total().work_s

    def waiting_prefill_s(self) -> float:
        return self._tally.total().prefill_s

    def batch_waiting(self) -> int:
        return len(self._batch)

    def waiting_before(self, cs: CallState) -> Ahead:
        """A batch call waits for every call here; an interactive call for the interactive
        calls of its own tenant and of the tenants not further than `fair_slack` ahead of
        it on the VTC counters (the others go after it)."""
        if is_batch(cs):
            return self._tally.total()
        view = self._view
        tenant = cs.query.query.tenant
        if view is None:
            return self._tally.total(lambda g: g is not None)
        limit = view.tenants.counter(tenant) + self.fair_slack
        counter = view.tenants.counter
        over = self._over if tenant not in self._over else ()
        return self._tally.total(lambda g: g is not None and (g == tenant or (counter(g) <= limit and g not in over)))

    def __len__(self) -> int:
        return len(self._q) + len(self._batch)

    def __iter__(self) -> Iterator[CallState]:
        yield from self._q.values()
        yield from self._batch.values()

    def running_context(self, inst: InstanceState) -> float:
        self._running.sync(inst)
        return self._running.context_sum()

    def batch_limit(self, inst: InstanceState) -> int:
        """The engine's sweet spot at its running batch's context (`flowserve.profiles.sweet_spot`):
        beyond it an added call slows every running one more than it adds throughput, so the
        rest wait here, where urgency, fair shares and the batch filler order them."""
        book = self._running
        book.sync(inst)
        return self._spots(inst.cost, book.context(), engine_slots(inst))

    def _beside(self, inst: InstanceState) -> int:
        """The batch size batch work may grow to beside interactive calls: the sweet spot at
        `batch_gain`, where those calls' decode steps are at most 1/√batch_gain slower."""
        return self._beside_spots(inst.cost, self._running.context(), engine_slots(inst))

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        limit = replica_share(self.batch_limit(inst), inst)  # peer replicas' calls fill the spot too
        if self._q:
            if self._running.interactive >= limit:
                return None  # batch calls running do not hold interactive ones back: they end soon
            top = self._fair_select(inst, view) if len(inst.waiting_tenants) > 1 else super().select(inst, view)
            if top is None:
                return None
            over = self._over_share(inst, view, limit)
            if top.query.query.tenant not in over:
                return top
            under = self._most_urgent(lambda c: c.query.query.tenant not in over)
            if under is not None:
                return under  # a tenant within its share of the spot goes first
            if self.reserve and len(inst.running) >= self._beside(inst):
                return None  # `reserve`: the flooder stays below the stricter spot
            return top
        if not self._batch or len(inst.running) >= limit:
            return None
        if self._running.interactive and (view.now < self._next_batch or len(inst.running) >= self._beside(inst)):
            return None  # beside interactive calls: a smaller batch, one batch prefill at a time (`batch_gap`)
        top = next(iter(self._batch.values()))
        self._batch_pick = top.id
        return top

    def _over_share(self, inst: InstanceState, view: ClusterView, spot: int) -> set[str]:
        """Tenants running at least their weighted share of the sweet spot (`entitled_slots`)
        while another tenant has calls here or had within `tenant_memory_s`: the others'
        calls go first, and interactive waits do not count theirs. With `reserve` they also
        wait beyond the stricter spot when nobody else waits, so a light tenant's calls find
        a batch near the size they would find alone (a flood cannot fill the engine around
        them) at the price of throughput; a lone tenant always gets the whole spot."""
        running = self._running.tenants
        horizon = view.now - self.tenant_memory_s
        active = {t for t, seen in self._seen.items() if seen >= horizon}.union(running, inst.waiting_tenants)
        if len(active) < 2:
            self._over = set()
            return self._over
        weight = view.tenants.weight
        total = sum(weight(t) for t in active)
        self._over = {t for t, n in running.items() if n >= entitled_slots(weight(t), total, spot)}
        return self._over

    def _most_urgent(self, keep) -> CallState | None:
        best, best_key = None, -math.inf
        for cs in self._q.values():
            if not keep(cs):
                continue
            entry = self._keys.get(cs.id)
            key = entry[1] if entry is not None else -math.inf
            if best is None or key > best_key:
                best, best_key = cs, key
        return best

    def _static_key(self, cs: CallState, version: int, view: ClusterView,
                    peers: Sequence[InstanceState]) -> float:
        if cs.query.query.deadline is None:  # below every deadline's key; least served first
            return NO_DEADLINE - cs.query.service_s
        return super()._static_key(cs, version, view, peers)

    def _fair_select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        """The most urgent call, unless its tenant is more than fair_slack weighted tokens
        ahead of the least-served backlogged tenant: then that tenant's most urgent call."""
        top = super().select(inst, view)
        assert top is not None
        ledger = view.tenants
        poorest = min(inst.waiting_tenants, key=ledger.counter)
        if ledger.counter(top.query.query.tenant) - ledger.counter(poorest) <= self.fair_slack:
            return top
        return self._most_urgent(lambda c: c.query.query.tenant == poorest) or top
