"""What replicas tell each other on every heartbeat, and how a replica turns its peers'
reports into events for its core. Sans-IO: the live sync (through Redis) and the
simulator's replicas (a delay in virtual time) run this same code.

A report is a replica's totals, never a delta: its load on each instance now, and the
service it has given each tenant so far. Totals make every exchange idempotent (a report
read twice, or again after Redis came back, changes nothing twice), the way each replica
owns its slot of a grow-only counter in CRDT gossip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowserve.types.peers import InstanceLoad, PeerLoad, PeerService, TenantCost

MAX_TENANTS = 1000  # tenants a report carries (the most served first)


@dataclass(frozen=True, slots=True)
class Report:
    replica: str
    time: float  # when it was made, on the sender's clock
    loads: tuple[InstanceLoad, ...]
    tenants: tuple[TenantCost, ...] = ()
    # the state's epoch the sender had seen, and its program parts not yet written there:
    # a report with epoch ≥ E and nothing pending says "all I did before E is written"
    epoch: int = 0
    pending: int = 0


def make_report(replica: str, time: float, loads: tuple[InstanceLoad, ...],
                costs: Mapping[str, float], epoch: int = 0, pending: int = 0) -> Report:
    """A replica's report from its core's `own_load()` and `tenant_costs()`."""
    tenants = sorted(costs.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TENANTS]
    return Report(replica, time, loads, tuple(TenantCost(t, c) for t, c in tenants), epoch, pending)


class PeerTracker:
    """Peers' latest reports → events for this replica's core: `PeerLoad` when a peer's
    load changed (an empty one when it left), `PeerService` when its totals grew."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._loads: dict[str, tuple[InstanceLoad, ...]] = {}
        self._tenants: dict[str, tuple[TenantCost, ...]] = {}
        self.reports: dict[str, Report] = {}  # every live peer's latest

    @property
    def peers(self) -> list[str]:
        return sorted(self._loads)

    def apply(self, now: float, reports: Mapping[str, Report]) -> list[PeerLoad | PeerService]:
        """`reports`: every live peer's latest (a peer missing from it has left)."""
        out: list[PeerLoad | PeerService] = []
        self.reports = {r: rep for r, rep in reports.items() if r != self.me}
        for replica in sorted(set(self._loads) - set(reports)):
            del self._loads[replica]
            self._tenants.pop(replica, None)
            out.append(PeerLoad(now, replica))
        for replica in sorted(reports):
            r = reports[replica]
            if replica == self.me:
                continue
            if self._loads.get(replica) != r.loads:
                self._loads[replica] = r.loads
                out.append(PeerLoad(now, replica, r.loads))
            if r.tenants and self._tenants.get(replica) != r.tenants:
                self._tenants[replica] = r.tenants
                out.append(PeerService(now, replica, r.tenants))
        return out

    def forget(self, now: float) -> list[PeerLoad]:
        """Every peer's share goes (this replica lost the shared state for long)."""
        out = [PeerLoad(now, replica) for replica in sorted(self._loads)]
        self._loads.clear()
        self.reports = {}
        return out
