"""Peer replicas in the core: their load joins the instances' outstanding work and shares
`max_inflight`, their routed prompts join the prefix index, their service the tenants'
VTC counters and programs' attained service; repeated reports change nothing twice."""

from __future__ import annotations

import pytest
from helpers import ScriptedDriver, ScriptProgram, live_spec, llm, make_core, query

from flowserve.graph.program import Program, ProgramCall
from flowserve.graph.prompt import Toks
from flowserve.types.events import QueryInput
from flowserve.types.peers import InstanceLoad, PeerLoad, PeerRouted, PeerService, ProgramShared, TenantCost
from flowserve.types.work import Query


def load(name: str, running: int = 0, queued: int = 0, work: float = 0.0) -> InstanceLoad:
    return InstanceLoad(name, running, queued, work)


def outstanding(core, name: str) -> float:
    return {s.name: s.outstanding_s for s in core.instance_status()}[name]


def test_peer_load_joins_the_instance_work_once_and_leaves_with_the_peer() -> None:
    core = make_core([live_spec("a"), live_spec("b")], dispatch="least_load")
    core.handle(PeerLoad(0.0, "r2", (load("a", 2, 1, 5.0),)))
    core.handle(PeerLoad(0.1, "r2", (load("a", 2, 1, 5.0),)))  # the same heartbeat again
    core.handle(PeerLoad(0.2, "r3", (load("a", 1, 0, 1.5), load("b", 0, 0, 0.0))))
    assert outstanding(core, "a") == pytest.approx(6.5)
    assert [(x.instance, x.outstanding_s) for x in core.own_load()] == [("a", 0.0), ("b", 0.0)]
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([llm("x")])))
    assert d.sent[-1].instance == "b"  # least load sees the peers' work on a
    core.handle(PeerLoad(0.3, "r2", (load("a", 0, 0, 0.5),)))  # r2's work on a drained
    core.handle(PeerLoad(0.4, "r3"))  # r3 left: its share is gone
    assert outstanding(core, "a") == pytest.approx(0.5)
    own = {x.instance: x for x in core.own_load()}
    assert own["b"].running == 1 and own["b"].outstanding_s > 0 and own["a"].running == 0


def test_peers_share_max_inflight_and_each_keeps_an_equal_share() -> None:
    core = make_core([live_spec("a", max_inflight=4)])
    d = ScriptedDriver(core)
    core.handle(PeerLoad(0.0, "r2", (load("a", 3),)))
    for _ in range(4):
        d.arrive(query(ScriptProgram([llm("x")])))
    assert len(d.inflight) == 2  # 4 − 3 leaves 1, but an equal share of 4 between 2 replicas is 2
    d.feed(PeerLoad(1.0, "r2", (load("a", 1),)))  # the peer's calls ended: 4 − 1 − 2 = 1 more
    assert len(d.inflight) == 3
    d.feed(PeerLoad(2.0, "r2"))  # the peer left
    assert len(d.inflight) == 4


def test_peer_routed_prompts_join_the_prefix_index() -> None:
    core = make_core([live_spec("a"), live_spec("b")], dispatch="preble_e2")
    prompt = tuple(range(500))
    core.handle(PeerRouted(0.0, "b", prompt[:320]))
    core.handle(PeerRouted(0.0, "nowhere", prompt))  # an instance this replica does not know: ignored
    assert core.prefix_hit(prompt, "b") == 320 and core.prefix_hit(prompt, "a") == 0
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([llm("x", n=500)])))
    assert d.sent[-1].instance == "b"  # exploit: the peer's prefix


def test_peer_service_charges_tenants_by_the_difference_of_totals() -> None:
    core = make_core([live_spec("a")])
    view = core._calls.view
    core.handle(PeerService(0.0, "r2", (TenantCost("gold", 600.0), TenantCost("free", 100.0))))
    core.handle(PeerService(0.1, "r2", (TenantCost("gold", 600.0),)))  # repeated: nothing more
    core.handle(PeerService(0.2, "r3", (TenantCost("gold", 300.0),)))
    core.handle(PeerService(0.3, "r2", (TenantCost("gold", 500.0),)))  # an older report: ignored
    assert view.tenants.counter("gold") == pytest.approx(900.0)
    assert view.tenants.counter("free") == pytest.approx(100.0)
    assert dict(core.tenant_costs()) == {}  # only this replica's own service is shared onwards


def test_a_program_attains_the_service_of_its_calls_at_other_replicas() -> None:
    core = make_core([live_spec("a")])
    d = ScriptedDriver(core)
    d.arrive(Query(7, 0.0, "program", Program("p"), None))
    d.feed(ProgramShared(0.5, 7, 2.0))
    d.feed(ProgramShared(0.6, 7, 2.0))
    d.feed(ProgramShared(0.7, 99, 5.0))  # no such query here: nothing
    assert core._queries[7].service_s == pytest.approx(2.0)
    d.feed(QueryInput(1.0, 7, ProgramCall("c1", (Toks((1, 2, 3)),), 4, "s")))
    d.t = 1.0
    d.finish(d.sent[-1].call.id)
    assert core._queries[7].service_s == pytest.approx(3.0)  # + its own call's 1 s (sent at 1, done at 2)
