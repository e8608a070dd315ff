"""Peers' reports become events only when they change, and a peer that left takes its share with it."""

from __future__ import annotations

from flowserve.replicas.peers import MAX_TENANTS, PeerTracker, Report, make_report
from flowserve.types.peers import InstanceLoad, PeerLoad, PeerService, TenantCost

A1 = (InstanceLoad("a", 1, 0, 0.5),)


def test_reports_become_events_when_they_change() -> None:
    t = PeerTracker("me")
    r2 = Report("r2", 1.0, A1, (TenantCost("gold", 10.0),))
    first = t.apply(5.0, {"r2": r2, "me": Report("me", 1.0, A1)})
    assert first == [PeerLoad(5.0, "r2", A1), PeerService(5.0, "r2", (TenantCost("gold", 10.0),))]
    assert t.apply(6.0, {"r2": r2}) == []  # the same report: nothing
    assert t.peers == ["r2"]
    busier = Report("r2", 2.0, (InstanceLoad("a", 3, 1, 2.0),), r2.tenants)
    assert t.apply(7.0, {"r2": busier}) == [PeerLoad(7.0, "r2", busier.loads)]
    assert t.apply(8.0, {}) == [PeerLoad(8.0, "r2")]  # gone: its share with it
    assert t.peers == []


def test_forget_drops_every_peer_share() -> None:
    t = PeerTracker("me")
    t.apply(0.0, {"r2": Report("r2", 0.0, A1), "r3": Report("r3", 0.0, A1)})
    assert t.forget(1.0) == [PeerLoad(1.0, "r2"), PeerLoad(1.0, "r3")]
    assert t.apply(2.0, {"r2": Report("r2", 0.0, A1)}) == [PeerLoad(2.0, "r2", A1)]  # back: learned again


def test_a_report_carries_the_most_served_tenants() -> None:
    costs = {f"t{i}": float(i) for i in range(MAX_TENANTS + 5)}
    r = make_report("r1", 0.0, A1, costs)
    assert len(r.tenants) == MAX_TENANTS and r.tenants[0].tenant == f"t{MAX_TENANTS + 4}"
