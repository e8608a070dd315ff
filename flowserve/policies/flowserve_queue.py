"""flowserve's queue policy (`--queue flowserve`; the dispatch is the `flowserve` scoring profile, docs/policies.md).

Order: calls with a deadline by Hexgen urgency; a program's calls (a workflow whose
client decides each next call) by the Gittins index of its call count learned online
(`flowserve_programs`) while its deadline is not at risk; other deadline-free calls
least attained service first. Across tenants, VTC weighted fair shares (the core keeps
the accounts, weighted by this policy's `tenant_weights`), and tenants within their
weighted share of the engine's sweet spot go before those over it. Batch calls are
capped FCFS filler with a floor. How many calls the engine runs at once is the gate's
(`flowserve_gate`). It also keeps the per-instance sums dispatch policies may read
(`QueuePolicy.waiting_work_s` and the rest: work and prefill waiting, prefill still owed
by running calls)."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import CallState, InstanceState, replica_share
from flowserve.core.tenants import parse_weights
from flowserve.core.view import ClusterView
from flowserve.policies.flowserve_gate import (
    Gate,
    batch_gap,
    batch_room,
    engine_slots,
    entitled_slots,
    gate_limit,
    hurt_by,
    slot_caches,
)
from flowserve.policies.flowserve_programs import ProgramBook
from flowserve.policies.queue_books import Ahead, RunningBook, ServiceMeter, WaitingTally
from flowserve.policies.urgency import UrgencyQueue
from flowserve.profiles.sweet_spot import DEFAULT_GAIN

NO_DEADLINE = -1e18  # the urgency key of calls without a deadline, before their attained service


def is_batch(cs: CallState) -> bool:
    return cs.query.query.cls == "batch"


def _group(cs: CallState) -> str | None:
    """The tally group of a waiting call: its tenant, or None for batch work."""
    return None if is_batch(cs) else cs.query.query.tenant


class FlowserveQueue(UrgencyQueue):
    name = "flowserve"
    uses_deadline = True

    def __init__(
        self,
        tenant_weights: Annotated[str | Mapping[str, float], Help(
            "tenants' weights for fair shares, `gold:3,free:1` or a mapping (unnamed tenants weigh 1)")] = "",
        fair_slack: Annotated[float, Help("weighted tokens the most urgent call's tenant may be ahead of the "
                                          "least-served one before that one goes first (VTC), ≥ 0")] = 4096.0,
        gain: Annotated[float, Help("the sweet spot: the largest batch whose last sequence still adds this share "
                                    "of a lone sequence's decode throughput; 0 turns the gate off")] = DEFAULT_GAIN,
        batch_share: Annotated[float, Help("beside interactive calls, batch work's prefills take at most this "
                                           "share of the engine's time (1: one prefill at a time), in (0, 1]")]
        = 1.0,
        batch_gain: Annotated[float, Help("the stricter sweet spot batch work (and flooders beside shielded "
                                          "calls) grows to beside interactive calls")] = 0.8,
        tenant_memory_s: Annotated[float, Help("a tenant counts as active at an instance this long after its "
                                               "last call was released there, seconds")] = 30.0,
        adapt: Annotated[bool, Help("the adaptive gate: open to the engine's slots while interactive calls "
                                    "wait, unless a fragile call runs")] = True,
        batch_floor: Annotated[bool, Help("batch work keeps its weighted share of the spot while interactive "
                                          "calls wait")] = True,
        isolate: Annotated[bool, Help("a deadline-free call of a tenant within its share holds over-share "
                                      "tenants like batch work while it runs")] = True,
        flood_share: Annotated[float, Help("beside a shielded call, an over-share tenant's prefills take at most "
                                           "this share of the engine's time, in (0, 1]")] = 0.1,
        programs: Annotated[bool, Help("order a program's calls by the Gittins index of its call count "
                                       "while its deadline is not at risk")] = True,
        rate_window_s: Annotated[float, Help("the window the gate measures interactive arrivals over, "
                                             "seconds")] = 60.0,
    ) -> None:
        super().__init__()
        if fair_slack < 0:
            raise ValueError(f"fair_slack must be ≥ 0, got {fair_slack}")
        for name, share in (("batch_share", batch_share), ("flood_share", flood_share)):
            if not 0.0 < share <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {share}")
        if tenant_memory_s < 0:
            raise ValueError(f"tenant_memory_s must be ≥ 0, got {tenant_memory_s}")
        self.tenant_weights = parse_weights(tenant_weights)  # the core's VTC accounts use them
        self.fair_slack = fair_slack
        self.gain, self.batch_gain, self.batch_share, self.flood_share = gain, batch_gain, batch_share, flood_share
        self.tenant_memory_s = tenant_memory_s
        self.adapt, self.batch_floor, self.isolate, self.programs = adapt, batch_floor, isolate, programs
        self._gate = Gate(gain, batch_gain, rate_window_s)
        self._programs = ProgramBook()
        self._meter = ServiceMeter()  # engine seconds per program call: the at-risk margin
        self._seen: dict[str, float] = {}  # tenant → when its last call was released here
        self._over: set[str] = set()  # the tenants over their share at the last `select` (`_over_share`)
        self._pressed = False  # the first waiting call at the last `select` was at risk (`_scan`)
        self._batch: OrderedDict[int, CallState] = OrderedDict()
        self._tally = WaitingTally()  # per tenant's interactive calls, and the batch calls (None)
        self._prefill: dict[int, float] = {}  # waiting call → prefill seconds
        self._running = RunningBook()
        # when batch work (and a tenant over its share beside shielded calls) may start its next call
        self._next = {"batch": -math.inf, "flood": -math.inf}
        self._picked: tuple[str, int] | None = None  # what `select` named last, if held back by a gap
        self._view: ClusterView | None = None

    def bind(self, view: ClusterView) -> None:
        self._view = view

    # ------------------------------------------------------------------ the calls waiting

    def push(self, cs: CallState) -> None:
        pf = self._prefill[cs.id] = self._prefill_s(cs)
        self._tally.add(_group(cs), cs.t_comp, pf)
        if is_batch(cs):
            self._batch[cs.id] = cs
            return
        self._gate.queued(cs, pf, self._view.now if self._view is not None else 0.0)
        if self.programs and cs.query.run.workflow.learns_remaining:
            self._programs.saw(cs.query)
            self._meter.saw(cs)
        super().push(cs)

    def remove(self, cs: CallState, released: bool) -> None:
        pf = self._prefill.pop(cs.id, 0.0)
        self._tally.remove(_group(cs), cs.t_comp, pf)
        view = self._view
        if released and view is not None:
            self._started(cs, view, pf)
        if cs.id in self._batch:
            del self._batch[cs.id]
            return
        self._gate.left(cs, pf)
        super().remove(cs, released)

    def _started(self, cs: CallState, view: ClusterView, pf: float) -> None:
        self._pressed = False  # it was about the call `select` named: the next scan says anew
        inst = view.instances.get(cs.instance or "")
        fragile = False
        if inst is not None:
            self._running.sync(inst)
            fragile = self._fragile(cs, inst, view.now)
        self._running.start(cs, view.now, pf, fragile, self._shielded(cs))
        if not is_batch(cs):
            self._seen[cs.query.query.tenant] = view.now
        if self._picked is not None and self._picked[1] == cs.id:
            kind = self._picked[0]
            self._next[kind] = view.now + batch_gap(pf, self.batch_share if kind == "batch" else self.flood_share)

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

    # ------------------------------------------------------------------ what dispatch may read

    def waiting_work_s(self) -> float:
        return self._tally.total().work_s

    def waiting_prefill_s(self) -> float:
        return self._tally.total().prefill_s

    def running_prefill_s(self, inst: InstanceState, now: float) -> float:
        """Prefill seconds the running calls still owe (prefills share the token budget:
        they go one after the other, while decodes share the batch)."""
        self._running.sync(inst)
        return self._running.prefill_owed_s(now)

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

    def running_context(self, inst: InstanceState) -> float:
        self._running.sync(inst)
        return self._running.context_sum()

    def batch_limit(self, inst: InstanceState) -> int:
        """How many interactive calls the engine runs at once (`flowserve_gate`): its sweet
        spot at the running calls' context while nobody waits or the gate must hold (a
        fragile call, or slots that are the engine's prefix cache); its slots otherwise. A
        call sent here meets it with itself waiting."""
        return self._limit(inst, 1)

    # ------------------------------------------------------------------ the gate

    def _limit(self, inst: InstanceState, joining: int) -> int:
        """`batch_limit` with `joining` more interactive calls waiting than wait now."""
        book = self._running
        book.sync(inst)
        ctx = book.context()
        spot = self._gate.spot(inst, ctx)
        waiting = len(self._q) + joining
        if not self.adapt or not waiting:
            return spot
        view = self._view
        hold = bool(book.fragile) or slot_caches(inst)
        overloaded = view is not None and hold and not self._pressed and self._gate.overloaded(inst, ctx, view.now)
        return gate_limit(spot, engine_slots(inst), waiting, hold, self._pressed, overloaded)

    def _fragile(self, cs: CallState, inst: InstanceState, now: float) -> bool:
        """A call being released that opening the gate would hurt: a call with a deadline, of a
        tenant within its share (a flooder is not protected from its own backlog), whose
        urgency fits its budget in a batch at the spot but not in the batch of every call here."""
        if not self.adapt or cs.query.query.deadline is None or is_batch(cs) or cs.query.query.tenant in self._over:
            return False
        entry = self._keys.get(cs.id)
        if entry is None:
            return False
        ctx = self._running.context()
        present = len(inst.running) + len(self._q)  # every interactive call here, this one included
        narrow = min(self._gate.spot(inst, ctx), present)
        wide = min(engine_slots(inst), present)
        return wide > narrow and hurt_by(entry[1] + now, cs.t_comp, self._gate.slowdown(inst, ctx, narrow, wide))

    def _shielded(self, cs: CallState) -> bool:
        """A deadline-free interactive call of a tenant within its share while another tenant
        is over its share here (`isolate`): its only contract is to be served as if alone,
        so while it runs the tenants over their share are held like batch work."""
        q = cs.query.query
        return self.isolate and bool(self._over) and q.deadline is None and q.cls != "batch" \
            and q.tenant not in self._over

    def _floor(self, inst: InstanceState, view: ClusterView, spot: int) -> bool:
        """Batch work's floor (`batch_floor`): while interactive calls wait, a batch call still
        starts while the batch calls running hold less than their weighted share of the
        spot, the batch work's tenant counted among the active tenants (`entitled_slots`).
        `select` takes it from the waiting calls' slack: while the first of them is at risk,
        only up to one batch call running (batch work still progresses, never starved)."""
        if not (self.batch_floor and self._batch):
            return False
        book = self._running
        batch_running = len(book) - book.interactive
        weight = view.tenants.weight
        w = weight(next(iter(self._batch.values())).query.query.tenant)
        active = self._active(inst, view)
        return batch_running < entitled_slots(w, w + sum(weight(t) for t in active), spot)

    def _active(self, inst: InstanceState, view: ClusterView) -> set[str]:
        """The interactive tenants with calls running or waiting here, or released here within
        `tenant_memory_s`."""
        horizon = view.now - self.tenant_memory_s
        return {t for t, seen in self._seen.items() if seen >= horizon}.union(self._running.tenants,
                                                                             inst.waiting_tenants)

    def _over_share(self, inst: InstanceState, view: ClusterView, spot: int) -> set[str]:
        """Tenants running at least their weighted share of the sweet spot (`entitled_slots`)
        while another tenant has calls here or had within `tenant_memory_s`: the others'
        calls go first, and interactive waits do not count theirs; a lone tenant is never over."""
        running = self._running.tenants
        active = self._active(inst, view)
        if len(active) < 2:
            self._over = set()
            return self._over
        weight = view.tenants.weight
        total = sum(weight(t) for t in active)
        self._over = {t for t, n in running.items() if n >= entitled_slots(weight(t), total, spot)}
        return self._over

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        limit = replica_share(self._limit(inst, 0), inst)  # peer replicas' calls fill the spot too
        book = self._running
        ctx = book.context()
        spot = self._gate.spot(inst, ctx)
        now = view.now
        self._picked = None
        if self._q:
            floor = self._floor(inst, view, spot)
            if not floor and book.interactive >= limit:
                return None  # batch calls running do not hold interactive ones back: they end soon
            multi = len(inst.waiting_tenants) > 1
            top, tenants = self._scan(inst, view, multi)
            if floor and (not self._pressed or len(book) == book.interactive):
                return self._pick("batch", next(iter(self._batch.values())))  # the floor (`_floor`)
            if top is None or book.interactive >= limit:
                return None
            if multi:
                top = self._fair(top, tenants, inst, view)
            over = self._over_share(inst, view, spot)
            if top.query.query.tenant not in over:
                return top
            under = max((v for t, v in tenants.items() if t not in over), default=None)
            if under is not None:
                return under[2]  # a tenant within its share of the spot goes first
            if book.shielded:  # beside shielded calls the flooder is held like batch work
                if now < self._next["flood"] or len(inst.running) >= self._gate.beside(inst, ctx):
                    return None
                return self._pick("flood", top)
            return top
        if not self._batch or len(inst.running) >= batch_room(limit, engine_slots(inst), book.interactive,
                                                              self._gate.rate(now), slot_caches(inst)):
            return None
        if book.interactive and (now < self._next["batch"] or len(inst.running) >= self._gate.beside(inst, ctx)):
            return None  # beside interactive calls: a smaller batch, one batch prefill at a time (`batch_gap`)
        return self._pick("batch", next(iter(self._batch.values())))

    def _pick(self, kind: str, cs: CallState) -> CallState:
        self._picked = (kind, cs.id)
        return cs

    # ------------------------------------------------------------------ the order

    def _static_key(self, cs: CallState, version: int, view: ClusterView,
                    peers: Sequence[InstanceState]) -> float:
        if cs.query.query.deadline is None:  # below every deadline's key; least served first
            return NO_DEADLINE - cs.query.service_s
        return super()._static_key(cs, version, view, peers)

    def _fair(self, top: CallState, tenants: dict[str, tuple], inst: InstanceState, view: ClusterView) -> CallState:
        """The first call, unless its tenant is more than fair_slack weighted tokens ahead of
        the least-served backlogged tenant: then that tenant's first call."""
        ledger = view.tenants
        poorest = min(inst.waiting_tenants, key=ledger.counter)
        if ledger.counter(top.query.query.tenant) - ledger.counter(poorest) <= self.fair_slack:
            return top
        best = tenants.get(poorest)
        return best[2] if best is not None else top

    def _scan(self, inst: InstanceState, view: ClusterView,
              by_tenant: bool) -> tuple[CallState | None, dict[str, tuple]]:
        """One pass over the interactive calls: the first in the queue's order (`_order`), and
        with `by_tenant` each tenant's first as (key, −position, call). Notes whether the
        first is at risk: its urgency within its own service of its budget."""
        best, best_key, best_u = None, None, 0.0
        tenants: dict[str, tuple] = {}
        keys = self._keys
        peers: list[InstanceState] | None = None
        now = view.now
        for pos, cs in enumerate(self._q.values()):
            version = len(cs.query.run.results)
            entry = keys.get(cs.id)
            if entry is None or entry[0] != version:
                if peers is None:
                    peers = view.up_instances(inst.spec.model)
                entry = (version, self._static_key(cs, version, view, peers))
                keys[cs.id] = entry
            key = self._order(cs, entry[1], now)
            if best_key is None or key > best_key:
                best, best_key, best_u = cs, key, entry[1]
            if by_tenant:
                tenant = cs.query.query.tenant
                mine = tenants.get(tenant)
                if mine is None or key > mine[0]:
                    tenants[tenant] = (key, -pos, cs)
        self._pressed = best is not None and best.query.query.deadline is not None and best_u + now > -best.t_comp
        return best, tenants

    def _order(self, cs: CallState, static: float, now: float) -> tuple[int, float]:
        """A call's place, highest first: (2) calls with a deadline by Hexgen urgency — a
        program's only while its deadline is at risk and can still be met (its urgency
        within one call's observed service below its budget: it fits now, not after
        waiting one more call); (1) a program's other calls by the Gittins index of its
        next call per second of the call's predicted service (`flowserve_programs`); (0)
        other calls without a deadline, least attained service first."""
        qs = cs.query
        deadline = qs.query.deadline is not None
        if not (self.programs and qs.run.workflow.learns_remaining):
            return (2, static) if deadline else (0, static)
        if deadline and -self._meter.mean_s(cs.t_comp) < static + now <= 0.0:
            return (2, static)
        return (1, self._programs.index(qs, now) / max(cs.t_comp, 1e-9))
