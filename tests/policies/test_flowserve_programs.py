"""What the flowserve queue learns of programs (Kaplan–Meier survival of their call
counts, the Gittins index) and the observed service per call, by hand."""

from __future__ import annotations

import pytest

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.graph.nodes import NodeResult
from flowserve.graph.program import Program, ProgramCall
from flowserve.graph.prompt import Toks
from flowserve.graph.runtime import QueryRun
from flowserve.policies.flowserve_programs import ProgramBook, gittins_index, km_survival
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.plas import ATLASQueue, PLASQueue
from flowserve.policies.queue_books import ServiceMeter
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query


def program(qid: int) -> QueryState:
    prog = Program()
    run = QueryRun(prog, qid)
    run.start()
    return QueryState(Query(qid, 0.0, "program", prog), run)


def issue(qs: QueryState, key: str) -> CallState:
    """The program's client sends its next call; the core would track it in flight."""
    [node] = qs.run.input(ProgramCall(key, (Toks((1, 2, 3)),), 8, "act"))
    cs = CallState(hash(key) % 10**6, node, qs, 0.0, 3, 8, 0)
    qs.inflight[cs.id] = cs
    return cs


def finish(qs: QueryState, cs: CallState, seconds: float) -> None:
    del qs.inflight[cs.id]
    qs.attain(cs.node.key, cs.node.deps, seconds)
    qs.run.complete(cs.node.key, NodeResult(stage="act"))


def test_kaplan_meier_by_hand_counts_the_running_programs_as_censored() -> None:
    # ended after 1, 2 and 2 calls: S(1) = 2/3, S(2) = 0
    assert km_survival([1, 2, 2], []) == pytest.approx([1.0, 2 / 3, 0.0])
    # one ended after 1 call, one still running after issuing 3 (N ≥ 3: at risk at 1 and 2):
    # S(1) = 1 − 1/2; nothing ends at 2 among the one at risk; after that nobody is observed
    assert km_survival([1], [3]) == pytest.approx([1.0, 0.5, 0.5, 0.5])
    assert km_survival([1], []) == [1.0, 0.0]  # the finished alone say every program ends at 1


def test_gittins_index_by_hand() -> None:
    s = [1.0, 2 / 3, 0.0]
    # a new program (issued 1): max(m=1: (1 − 2/3)/1, m=2: (1 − 0)/(1 + 2/3)) = 0.6
    assert gittins_index(s, 1) == pytest.approx(0.6)
    assert gittins_index(s, 2) == pytest.approx(1.0)  # one call done: its next call is its last
    assert gittins_index(s, 3) == 0.0  # longer than any seen: last
    assert gittins_index([1.0, 0.5, 0.5, 0.5], 2) == 0.0  # nothing seen end after 1 call: it may go on


def test_program_book_learns_counts_online_and_orders_a_program_near_its_end_first() -> None:
    book = ProgramBook(refresh_s=1.0)
    short, long_ = program(1), program(2)
    for qs in (short, long_):
        book.saw(qs)
    assert book.index(short, 0.0) == 0.0  # nothing ended yet: no order
    c = issue(short, "a")
    finish(short, c, 0.5)
    short.ended = True
    finish(long_, issue(long_, "a"), 0.5)
    issue(long_, "b")  # the long one issued 2 calls: N ≥ 2
    fresh = program(3)
    issue(fresh, "a")
    book.saw(fresh)
    # ended [1], running [2, 1]: S(1) = 1 − 1/2 (at risk: the ended one and the long one)
    assert book.index(fresh, 0.5) == 0.0  # no rebuild within refresh_s
    assert book.index(fresh, 1.0) == pytest.approx(gittins_index(km_survival([1], [2, 1]), 1)) == 0.5
    assert book.index(long_, 1.0) == 0.0  # past every ended program's count


def test_service_meter_observes_seconds_per_finished_call() -> None:
    meter = ServiceMeter()
    qs = program(1)
    first = issue(qs, "a")
    meter.saw(first)
    assert meter.mean_s(0.3) == 0.3  # nothing finished: the fallback
    finish(qs, first, 0.8)
    second = issue(qs, "b")
    meter.saw(second)
    finish(qs, second, 1.6)
    meter.saw(issue(qs, "c"))  # two calls done, 2.4 s: 1.2 s each
    assert meter.mean_s(0.3) == pytest.approx(1.2)
    other = program(2)
    finish(other, issue(other, "a"), 0.3)
    meter.saw(issue(other, "b"))
    assert meter.mean_s(0.3) == pytest.approx(2.7 / 3)


def test_plas_quantum_is_the_observed_service_per_call_unless_given() -> None:
    q = PLASQueue()
    assert q.quantum() == 1.0  # nothing seen
    qs = program(1)
    first = issue(qs, "a")
    first.t_comp = 0.25
    q.push(first)
    assert q.quantum() == 0.25  # before any call finished: the first call's predicted service
    q.remove(first, released=True)
    finish(qs, first, 0.5)
    q.push(issue(qs, "b"))
    assert q.quantum() == pytest.approx(0.5)  # one call of 0.5 s observed
    assert PLASQueue(quantum_s=2.0).quantum() == 2.0


# ---------------------------------------------------------------- the flowserve queue's order of programs

A100 = cost_model_for("A100-80G", "llama-3.1-8b")
_cids = iter(range(1, 10**6))


def agent(qid: int, deadline: float | None = None) -> QueryState:
    prog = Program()
    run = QueryRun(prog, qid)
    run.start()
    return QueryState(Query(qid, 0.0, "agent", prog, deadline), run)


def step(qs: QueryState) -> CallState:
    """The program's next call, as the core tracks it (same prompt and output for all)."""
    cid = next(_cids)
    [node] = qs.run.input(ProgramCall(f"k{cid}", (Toks(tuple(range(200))),), 16, "act"))
    cs = CallState(cid, node, qs, 0.0, 200, 16, cid)
    cs.call = LLMCall(cid, qs.id, node.key, "act", "agent", tuple(range(200)), 16, 16)
    cs.t_comp = A100.call_time(200, 16)
    qs.inflight[cid] = cs
    return cs


def served(h: PolicyHarness, inst: InstanceState, qs: QueryState, calls: int, seconds: float = 0.5) -> None:
    """`calls` calls of the program go through the queue and finish, `seconds` of service each."""
    for _ in range(calls):
        cs = step(qs)
        h.enqueue(cs, inst)
        h.release(cs, inst)
        del inst.running[cs.id]
        finish(qs, cs, seconds)


def learned(programs: bool = True) -> tuple[PolicyHarness, InstanceState]:
    """A flowserve queue that saw four programs end: three after 2 calls, one after 6."""
    inst = InstanceState(InstanceSpec("a", "A100-80G", "llama-3.1-8b"), A100, FlowserveQueue(programs=programs))
    h = PolicyHarness([inst])
    for qid, n in ((101, 2), (102, 2), (103, 2), (104, 6)):
        qs = agent(qid)
        served(h, inst, qs, n)
        qs.ended = True
    h.at(5.0)
    return h, inst


def test_km_and_gittins_of_the_learned_programs_by_hand() -> None:
    s = km_survival([2, 2, 2, 6], [])
    assert s == pytest.approx([1.0, 1.0, 0.25, 0.25, 0.25, 0.25, 0.0])
    assert gittins_index(s, 2) == pytest.approx(0.75)
    assert gittins_index(s, 3) == pytest.approx(0.25)


def test_a_program_near_its_end_goes_before_a_long_one_with_the_same_deadline_slack() -> None:
    for programs, first in ((True, "short"), (False, "long")):
        h, inst = learned(programs)
        q = inst.queue
        long_, short = agent(1, deadline=1000.0), agent(2, deadline=1000.0)
        served(h, inst, long_, 2)  # the long one is past 2 calls: it goes on
        served(h, inst, short, 1)
        calls = {"long": step(long_), "short": step(short)}
        h.enqueue(calls["long"], inst)  # first in, the same prompt: urgency alone ties, FCFS keeps it first
        h.enqueue(calls["short"], inst)
        # ended [2, 2, 2, 6], running [3, 2] (censored): 6 at risk at 1, none ends; 5 at 2 (the
        # short one left), 3 end: S(2) = 2/5, then flat to S(6) = 0. The short one (a = 1 call
        # done): m = 1 gives (1 − 2/5)/1 = 3/5, its next call is likely its last; the long one
        # (a = 2): (2/5 − S(2 + m)) / (m · 2/5), best at m = 4, 1/4, it likely goes on to 6
        if programs:
            assert q._programs.index(short, 5.0) == pytest.approx(0.6)
            assert q._programs.index(long_, 5.0) == pytest.approx(0.25)
        assert q.select(inst, h.at(5.0)) is calls[first]


def test_a_program_whose_deadline_is_at_risk_goes_first() -> None:
    h, inst = learned()
    q = inst.queue
    short = agent(2, deadline=1000.0)
    served(h, inst, short, 1)
    h.enqueue(near_end := step(short), inst)
    # the long program's deadline: its call's urgency U is linear in it (Hexgen Eq. 5–6);
    # at risk while −(observed service per call, 0.5 s) < U ≤ 0: aim at U = −0.25 s
    probes = []
    for d in (100.0, 200.0):
        probe = agent(len(probes) + 10, deadline=d)
        served(h, inst, probe, 2)
        cs = step(probe)
        cs.enqueued = h.view.now  # as if queued now, like the call below
        probes.append(q.urgency_of(cs, h.view))
    slope = (probes[1] - probes[0]) / 100.0
    risky = agent(3, deadline=100.0 + (-0.25 - probes[0]) / slope)
    served(h, inst, risky, 2)
    h.enqueue(late := step(risky), inst)
    assert q.urgency_of(late, h.view) == pytest.approx(-0.25)
    assert q._meter.mean_s(0.0) == pytest.approx(0.5)
    assert q.select(inst, h.view) is late  # the long program first: its deadline is at risk
    # with room for one more call its deadline is not at risk: the Gittins order again
    calm = agent(4, deadline=100.0 + (-0.75 - probes[0]) / slope)
    served(h, inst, calm, 2)
    h.release(late, inst)
    h.enqueue(step(calm), inst)
    assert q.select(inst, h.view) is near_end


@pytest.mark.parametrize("queue", [PLASQueue, ATLASQueue])
def test_the_observed_quantum_separates_short_calls_a_fixed_second_lumps_together(queue) -> None:
    # calls of 0.1 s: the observed quantum is 0.1 s. The old program attained 0.4 s (level
    # 1 + log2(4) = 3), the new one 0.1 s (level 1): the new one goes first. With Autellix's
    # default 1 s quantum both sit in level 0, FCFS: the old one, queued first, goes first
    for q, first in ((queue(), "new"), (queue(quantum_s=1.0), "old")):
        inst = InstanceState(InstanceSpec("a", "A100-80G", "llama-3.1-8b"), A100, q)
        h = PolicyHarness([inst])
        calls = {}
        for name, done in (("old", 4), ("new", 1)):
            qs = agent(len(calls) + 1)
            served(h, inst, qs, done, seconds=0.1)
            calls[name] = step(qs)
            h.enqueue(calls[name], inst)
        assert q.quantum() == pytest.approx(0.1 if q.quantum_s is None else 1.0)
        assert q.select(inst, h.at(0.0)) is calls[first]
