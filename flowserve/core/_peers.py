"""The core's book of peer replicas: other schedulers that route to the same engines.

Each replica decides alone, from its own view (as Dynamo's router replicas do); this book
folds what the replica sync learned of the others into that view:

* load (`PeerLoad`): each peer's running calls, queued calls and predicted work per
  instance. The sum over peers is part of the instance's `outstanding` (so every policy
  reading Hexgen's t_queue sees the whole fleet's), and peers' running calls count
  against `max_inflight` (`InstanceState.slots_free`: what peers leave, and at least an
  equal share each). A peer's reports replace each other: a late or repeated one moves
  nothing twice; an empty one (the peer left) removes its share.
* routed prompts (`PeerRouted`): the router's prefix index learns that the instance
  caches them, as if this replica had routed them (a request in Preble's window too) —
  unless the instance publishes its cache events: then every replica has the engine's own
  word (`flowserve.core._kv`) and a peer's guess adds nothing.
* tenants' service (`PeerService`): each peer's totals; the difference to its last
  report is charged to the tenant's VTC counter, so fair shares hold across replicas.
* programs (`ProgramShared`): service a program attained at other replicas joins its
  `service_s` here (Autellix's PLAS across replicas).
"""

from __future__ import annotations

from collections.abc import Callable

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.state import InstanceState, QueryState
from flowserve.core.tenants import TenantLedger
from flowserve.types.peers import InstanceLoad, PeerLoad, PeerRouted, PeerService, ProgramShared


class PeerBook:
    def __init__(self, instances: dict[str, InstanceState], tenants: TenantLedger, queries: dict[int, QueryState],
                 prefix_index: PrefixIndex | None, dirty: dict[InstanceState, None],
                 precise: Callable[[str], bool]) -> None:
        """dirty: the call book's instances to release from (their free slots changed);
        precise: whether an instance's view comes from its own cache events."""
        self._instances = instances
        self._tenants = tenants
        self._queries = queries
        self._index = prefix_index
        self._dirty = dirty
        self._precise = precise
        self._loads: dict[str, dict[str, InstanceLoad]] = {}  # peer → instance → its latest load there
        self._service: dict[str, dict[str, float]] = {}  # peer → tenant → cost reported
        self._programs: dict[int, float] = {}  # query → peers' service folded in

    @property
    def replicas(self) -> int:
        """Peers with a current load report."""
        return len(self._loads)

    def on_load(self, ev: PeerLoad) -> None:
        old = self._loads.pop(ev.replica, {})
        new = {load.instance: load for load in ev.loads}
        if new:
            self._loads[ev.replica] = new
        for name in old.keys() | new.keys():
            inst = self._instances.get(name)
            if inst is not None:
                self.refresh(inst)

    def refresh(self, inst: InstanceState) -> None:
        """Set the instance's peer share from the latest reports (also right after the
        instance was replaced: its new state starts without one)."""
        outstanding, running, queued, peers = 0.0, 0, 0, 0
        for loads in self._loads.values():
            load = loads.get(inst.name)
            if load is not None:
                outstanding += load.outstanding_s
                running += load.running
                queued += load.queued
                peers += load.running + load.queued > 0
        inst.outstanding += outstanding - inst.peer_outstanding
        inst.peer_outstanding = outstanding
        inst.peer_queued = queued
        if (running, peers) != (inst.peer_running, inst.peers):
            inst.peer_running, inst.peers = running, peers
            self._dirty[inst] = None

    def on_routed(self, ev: PeerRouted) -> None:
        if self._index is not None and ev.instance in self._instances and ev.tokens and not self._precise(ev.instance):
            self._index.add(ev.tokens, ev.instance, ev.time)

    def on_service(self, ev: PeerService) -> None:
        seen = self._service.setdefault(ev.replica, {})
        for t in ev.tenants:
            delta = t.cost - seen.get(t.tenant, 0.0)
            if delta > 0:  # totals only grow; a smaller one is an older report
                seen[t.tenant] = t.cost
                self._tenants.peer_charge(t.tenant, delta)

    def on_program(self, ev: ProgramShared) -> None:
        qs = self._queries.get(ev.query_id)
        if qs is None:
            self._programs.pop(ev.query_id, None)
            return
        delta = ev.service_s - self._programs.get(ev.query_id, 0.0)
        if delta > 0:
            self._programs[ev.query_id] = ev.service_s
            qs.service_s += delta
        if len(self._programs) > 2 * len(self._queries) + 64:  # ended programs' entries
            self._programs = {q: s for q, s in self._programs.items() if q in self._queries}
