"""What the flowserve queue learns of programs (Kaplan–Meier survival of their call
counts, the Gittins index) and the observed service per call, by hand."""

from __future__ import annotations

import pytest

from flowserve.core.state import CallState, QueryState
from flowserve.graph.nodes import NodeResult
from flowserve.graph.program import Program, ProgramCall
from flowserve.graph.prompt import Toks
from flowserve.graph.runtime import QueryRun
from flowserve.policies.flowserve_programs import ProgramBook, gittins_index, km_survival
from flowserve.policies.plas import PLASQueue
from flowserve.policies.queue_books import ServiceMeter
from flowserve.types.work import Query


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
