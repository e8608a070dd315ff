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

from flowserve.core.state import CallState, InstanceState
from flowserve.core.tenants import parse_weights
from flowserve.core.view import ClusterView
from flowserve.policies.urgency import UrgencyQueue

NO_DEADLINE = -1e18  # the urgency key of calls without a deadline, before their attained service


def is_batch(cs: CallState) -> bool:
    return cs.query.query.cls == "batch"


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


class FlowserveQueue(UrgencyQueue):
    name = "flowserve"
    uses_deadline = True

    def __init__(self, batch_share: float = 0.1, tenant_weights: str | Mapping[str, float] = "",
                 fair_slack: float = 4096.0,
                 batch_occupancy: float = 0.5) -> None:
        super().__init__()
        if not 0.0 < batch_share <= 1.0:
            raise ValueError(f"batch_share must be in (0, 1], got {batch_share}")
        if fair_slack < 0:
            raise ValueError(f"fair_slack must be ≥ 0, got {fair_slack}")
        self.batch_share = batch_share
        if not 0.0 < batch_occupancy <= 1.0:
            raise ValueError(f"batch_occupancy must be in (0, 1], got {batch_occupancy}")
        self.batch_occupancy = batch_occupancy
        self.tenant_weights = parse_weights(tenant_weights)  # the core's VTC accounts use them
        self.fair_slack = fair_slack
        self._batch: OrderedDict[int, CallState] = OrderedDict()
        self._batch_work = 0.0  # Σ t_comp of the batch calls waiting here
        self._queued_work = 0.0  # Σ t_comp of every call waiting here
        self._queued_prefill = 0.0  # Σ prefill seconds of their uncached prompts
        self._batch_prefill = 0.0  # the same for the batch calls
        self._prefill: dict[int, float] = {}
        self._started: dict[int, tuple[float, float]] = {}  # running call → (release time, prefill s)
        self._view: ClusterView | None = None

    def bind(self, view: ClusterView) -> None:
        self._view = view

    def push(self, cs: CallState) -> None:
        self._queued_work += cs.t_comp
        pf = self._prefill_s(cs)
        self._prefill[cs.id] = pf
        self._queued_prefill += pf
        if is_batch(cs):
            self._batch[cs.id] = cs
            self._batch_work += cs.t_comp
            self._batch_prefill += pf
            return
        super().push(cs)

    def running_prefill_s(self, inst: InstanceState, now: float) -> float:
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
        self._queued_work = 0.0 if last else max(0.0, self._queued_work - cs.t_comp)
        pf = self._prefill.pop(cs.id, 0.0)
        if released and pf > 0 and self._view is not None:
            self._started[cs.id] = (self._view.now, pf)
        self._queued_prefill = 0.0 if last else max(0.0, self._queued_prefill - pf)
        if cs.id in self._batch:
            del self._batch[cs.id]
            self._batch_work = max(0.0, self._batch_work - cs.t_comp) if self._batch else 0.0
            self._batch_prefill = max(0.0, self._batch_prefill - pf) if self._batch else 0.0
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
        return self._queued_work

    def waiting_prefill_s(self) -> float:
        return self._queued_prefill

    def batch_waiting(self) -> int:
        return len(self._batch)

    def batch_work_s(self) -> float:
        return self._batch_work

    def batch_prefill_s(self) -> float:
        return self._batch_prefill

    def __len__(self) -> int:
        return len(self._q) + len(self._batch)

    def __iter__(self) -> Iterator[CallState]:
        yield from self._q.values()
        yield from self._batch.values()

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        if self._q:
            if len(inst.waiting_tenants) > 1:
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
        if occupancy(inst) >= self.batch_occupancy:
            return None  # the engine's slots or KV are filling up: leave them to interactive work
        return next(iter(self._batch.values()))

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
        best, best_key = None, -math.inf
        for cs in self._q.values():
            if cs.query.query.tenant != poorest:
                continue
            entry = self._keys.get(cs.id)
            key = entry[1] if entry is not None else -math.inf
            if best is None or key > best_key:
                best, best_key = cs, key
        return best or top
