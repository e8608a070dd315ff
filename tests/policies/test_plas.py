"""Autellix's PLAS/ATLAS queues and locality-aware balancer on hand-built states."""

from __future__ import annotations

import pytest

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.errors import ConfigError
from flowserve.graph.nodes import LLMNode
from flowserve.graph.program import Program
from flowserve.graph.prompt import Toks
from flowserve.graph.runtime import QueryRun
from flowserve.policies import make_dispatch, queue_factory
from flowserve.policies.autellix import AutellixBalancer
from flowserve.policies.fcfs import FCFS
from flowserve.policies.plas import ATLASQueue, PLASQueue, priority_level, starved
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query

COST = cost_model_for("A100-80G", "llama-3.1-8b")
_ids = iter(range(1, 10**6))


def program(qid: int, service_s: float = 0.0) -> QueryState:
    qs = QueryState(Query(qid, 0.0, "program", Program()), QueryRun(Program(), qid))
    qs.service_s = service_s
    return qs


def call_of(qs: QueryState, tokens: int = 100, deps: tuple[str, ...] = ()) -> CallState:
    cid = next(_ids)
    node = LLMNode(f"c{cid}", "step", (Toks(tuple(range(tokens))),), 16, deps)
    cs = CallState(cid, node, qs, 0.0, tokens, 16, cid)
    cs.call = LLMCall(cid, qs.id, node.key, "step", "program", tuple(range(tokens)), 16, 16)
    return cs


def test_priority_levels_and_starvation_by_hand():
    assert priority_level(0.5, 1.0, 2.0, 8) == 0
    assert priority_level(1.0, 1.0, 2.0, 8) == 1     # [1, 2)
    assert priority_level(3.9, 1.0, 2.0, 8) == 2     # [2, 4)
    assert priority_level(4.0, 1.0, 2.0, 8) == 3
    assert priority_level(1e9, 1.0, 2.0, 8) == 7     # the last level is open-ended
    assert starved(8.0, 0.5, 1.0, 8.0) and not starved(7.9, 0.5, 1.0, 8.0)  # a quantum at least
    assert starved(40.0, 5.0, 1.0, 8.0) and not starved(39.0, 5.0, 1.0, 8.0)


def test_plas_releases_the_least_served_programs_call_and_promotes_the_starved():
    inst = InstanceState(InstanceSpec("a", "A100-80G", "llama-3.1-8b"), COST, PLASQueue(quantum_s=1.0))
    h = PolicyHarness([inst])
    long_prog, short_prog = program(1, service_s=10.0), program(2, service_s=0.2)
    old = call_of(long_prog)
    h.enqueue(old, inst)
    new = call_of(short_prog)
    h.at(1.0)
    h.enqueue(new, inst)
    assert inst.queue.select(inst, h.at(2.0)) is new          # level 0 beats level 4
    assert inst.queue.select(inst, h.at(79.9)) is new
    assert inst.queue.select(inst, h.at(80.0)) is old         # waited 8 × its 10 s: promoted, and first in
    with pytest.raises(ConfigError):
        queue_factory("plas", {"growth": 1.0})


def test_atlas_orders_by_the_critical_path_not_the_programs_total():
    inst = InstanceState(InstanceSpec("a", "A100-80G", "llama-3.1-8b"), COST, ATLASQueue(quantum_s=1.0))
    h = PolicyHarness([inst])
    wide = program(1)
    for i in range(6):  # six parallel threads of 1 s each: 6 s in all, 1 s on any path
        wide.attain(f"t{i}", (), 1.0)
    deep = program(2)
    deep.attain("d0", (), 2.5)  # one thread, 2.5 s on its path
    a, b = call_of(deep, deps=("d0",)), call_of(wide, deps=("t3",))
    h.enqueue(a, inst)
    h.enqueue(b, inst)
    assert inst.queue.select(inst, h.at(0.1)) is b            # path 1 s (level 1) before 2.5 s (level 2)
    plas = InstanceState(InstanceSpec("b", "A100-80G", "llama-3.1-8b"), COST, PLASQueue(quantum_s=1.0))
    h2 = PolicyHarness([plas])
    h2.enqueue(call_of(deep, deps=("d0",)), plas)
    h2.enqueue(b2 := call_of(wide, deps=("t3",)), plas)
    assert plas.queue.select(plas, h2.at(0.1)) is not b2      # PLAS: the wide program's 6 s count


def test_autellix_keeps_long_prompts_at_home_and_balances_short_ones():
    a, b = (InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b"), COST, FCFS()) for n in "ab")
    h = PolicyHarness([a, b])
    qs = program(1)
    qs.last_instance = "b"
    for _ in range(3):
        h.enqueue(call_of(program(9)), b)  # b is busier
    policy = AutellixBalancer(locality_tokens=2048)
    assert policy.choose(call_of(qs, tokens=3000), [a, b], h.at(0.0)) is b   # its context lives on b
    assert policy.choose(call_of(qs, tokens=500), [a, b], h.at(0.0)) is a    # short: least loaded
    assert policy.choose(call_of(program(2), tokens=3000), [a, b], h.at(0.0)) is a  # a first call
    assert make_dispatch("autellix", {"locality_tokens": "0"}).locality_tokens == 0

