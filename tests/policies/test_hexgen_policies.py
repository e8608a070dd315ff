"""Hexgen-Text2SQL policies: Eq. 4 score and dispatch, Eq. 5–7 budgets and urgency."""

from __future__ import annotations

import math

import pytest
from hexgen_helpers import Program, call, harness_of, instance, llm_node, query, view_of

from flowserve.errors import ConfigError
from flowserve.graph.nodes import CallEstimate, NodeResult
from flowserve.policies import DISPATCH_POLICIES, QUEUE_POLICIES, make_dispatch, queue_factory
from flowserve.policies.fcfs import FCFS
from flowserve.policies.hexgen import HexgenWB, hexgen_score
from flowserve.policies.urgency import UrgencyQueue, call_budget, remaining_costs, urgency
from flowserve.tune.online import TuningServices

# --------------------------------------------------------------------------- Eq. 4


def test_score_matches_hand_computed_values():
    # (1−α)·β/t_queue − α·t_comp
    assert hexgen_score(50.0, 2.0, 0.2, 1000.0) == pytest.approx(0.8 * 20 - 0.4)  # 15.6
    assert hexgen_score(100.0, 10.0, 0.5, 1000.0) == pytest.approx(0.0)
    assert hexgen_score(50.0, 25.0, 0.5, 1000.0) == pytest.approx(-2.5)
    assert hexgen_score(10.0, 3.0, 0.0, 500.0) == pytest.approx(50.0)


def test_score_idle_instance_and_pure_speed():
    assert hexgen_score(0.0, 2.0, 0.5, 1000.0) == math.inf  # idle: best on the queue term
    assert hexgen_score(0.0, 2.0, 1.0, 1000.0) == -2.0  # α = 1: speed only, queue ignored
    assert hexgen_score(123.0, 2.0, 1.0, 1000.0) == -2.0


def _busy(inst, outstanding):
    """Give an instance `outstanding` predicted seconds of running work."""
    qs = query(900 + len(inst.running))
    filler = call(9000 + len(inst.running), qs, {inst: outstanding})
    inst.running[filler.id] = filler
    inst.outstanding = outstanding
    return inst


def test_dispatch_trades_queue_against_compute_on_crafted_state():
    fast, slow = _busy(instance("a100", "A100-80G"), 100.0), _busy(instance("a6000", "A6000"), 50.0)
    view = view_of(fast, slow)
    cs = call(1, query(1), {fast: 10.0, slow: 25.0})
    pick = lambda a: HexgenWB(alpha=a, beta=1000.0).choose(cs, [fast, slow], view).name  # noqa: E731
    # α=0.5: fast 0.5·10 − 5 = 0 > slow 0.5·20 − 12.5 = −2.5;  α=0.2: fast 8 − 2 = 6 < slow 16 − 5 = 11
    assert pick(0.5) == "a100"
    assert pick(0.2) == "a6000"
    assert pick(0.0) == "a6000"  # queue only: the shorter queue
    assert pick(1.0) == "a100"  # speed only


def test_dispatch_prefers_idle_instance_then_the_faster_idle_one():
    busy = _busy(instance("a100", "A100-80G"), 5.0)
    idle_slow, idle_fast = instance("a6000", "A6000"), instance("l40", "L40")
    idle_slow.outstanding = 1e-13  # float residue of finished work: still idle
    view = view_of(busy, idle_slow, idle_fast)
    cs = call(1, query(1), {busy: 1.0, idle_slow: 3.0, idle_fast: 2.5})
    assert HexgenWB(alpha=0.9).choose(cs, [busy, idle_slow, idle_fast], view).name == "l40"
    assert HexgenWB(alpha=0.9).choose(cs, [busy, idle_slow], view).name == "a6000"


def test_speed_only_balances_between_equally_fast_instances():
    a, b = _busy(instance("a100-0"), 30.0), _busy(instance("a100-1"), 10.0)
    view = view_of(a, b)
    cs = call(1, query(1), {a: 4.0})  # same GPU profile: same t_comp on both
    assert HexgenWB(alpha=1.0).choose(cs, [a, b], view).name == "a100-1"


def test_dispatch_logs_both_terms_when_asked():
    fast, slow = _busy(instance("a100", "A100-80G"), 100.0), _busy(instance("a6000", "A6000"), 50.0)
    cs = call(1, query(1), {fast: 10.0, slow: 25.0})
    policy = HexgenWB(alpha=0.5, beta=1000.0)
    policy.log = []
    policy.choose(cs, [fast, slow], view_of(fast, slow))
    assert policy.log == [("s", "a100", [("a100", 100.0, 10.0), ("a6000", 50.0, 25.0)])]


def test_policies_are_registered_and_validate_their_parameters():
    assert DISPATCH_POLICIES["hexgen_wb"] is HexgenWB
    assert QUEUE_POLICIES["urgency"] is UrgencyQueue
    p = make_dispatch("hexgen_wb", {"alpha": "0.3", "beta": "250"})
    assert (p.alpha, p.beta, p.tuner) == (0.3, 250.0, None)
    tuned = make_dispatch("hexgen_wb", {"alpha_tuning": "on", "window_s": "50"})
    assert tuned.alpha == 0.0 and tuned.tick_s == 50.0 and tuned.tuner is None
    tuned.attach(TuningServices())  # the driver's services: policies never import the simulator
    assert tuned.tuner is not None
    p.attach(TuningServices())  # a policy takes only what it needs: no tuning, no tuner
    assert p.tuner is None
    assert isinstance(queue_factory("urgency")(), UrgencyQueue)
    with pytest.raises(ConfigError, match="alpha must be in"):
        make_dispatch("hexgen_wb", {"alpha": 1.5})
    with pytest.raises(ConfigError, match="beta must be positive"):
        make_dispatch("hexgen_wb", {"beta": 0})
    with pytest.raises(ConfigError, match="alpha_tuning"):
        make_dispatch("hexgen_wb", {"alpha_tuning": "maybe"})


# --------------------------------------------------------------------------- Eq. 5–7


def test_budget_and_urgency_hand_computed():
    assert call_budget(60.0, 3.0, 12.0) == pytest.approx(15.0)
    assert call_budget(-6.0, 1.0, 3.0) == pytest.approx(-2.0)  # already late: negative budget
    assert call_budget(60.0, 0.0, 0.0) == 60.0
    # paper Table 2: request #1 needs 26.7 s with a 30.4 s budget, #6 3.2 s with 3.3 s
    assert urgency(26.7, 30.4, 18.2) == pytest.approx(14.5)
    assert urgency(3.2, 3.3, 27.0) == pytest.approx(26.9)


# Table 2 of the paper: (request, arrive-at, urgency); #1 and #6 with their t_comp and budget.
TABLE2 = [(1, 22.4, 14.5), (2, 46.3, 13.2), (3, 52.3, 19.0), (4, 62.4, 13.1), (5, 62.8, 19.0),
          (6, 64.4, 26.9), (7, 65.0, 21.9)]
T_COMP = {1: 26.7, 6: 3.2}
BUDGET = {1: 30.4, 6: 3.3}


def _table2_queue(queue_policy):
    """One instance whose queue holds Table 2's requests at t = 91.4 s, each the only
    remaining call of its query, so its Eq. 5 budget is the query's remaining deadline.
    #1's query progressed at 73.2 s (a sibling finished; its budget was re-split then)."""
    now = 91.4
    inst = instance("m", queue=queue_policy)
    calls, queries = {}, []
    for rid, arrive, u in TABLE2:
        t_comp = T_COMP.get(rid, 1.0)
        progressed = 73.2 if rid == 1 else arrive
        queued = now - max(arrive, progressed)
        budget = BUDGET.get(rid, t_comp + queued - u)  # solve Eq. 6 for the others
        qs = query(rid, arrival=0.0, deadline=progressed + budget)
        qs.progressed = progressed
        cs = call(rid, qs, {inst: t_comp}, enqueued=arrive)
        cs.t_comp = t_comp
        inst.queue.push(cs)
        calls[rid] = cs
        queries.append(qs)
    return inst, calls, view_of(inst, queries=queries, now=now)


def test_urgency_queue_reproduces_paper_table2():
    inst, calls, view = _table2_queue(UrgencyQueue())
    for rid, _, u in TABLE2:
        assert inst.queue.urgency_of(calls[rid], view) == pytest.approx(u, abs=1e-9)
    assert inst.queue.budget(calls[1], view) == pytest.approx(30.4)
    assert inst.queue.budget(calls[6], view) == pytest.approx(3.3)
    assert inst.queue.select(inst, view).id == 6  # most urgent first
    fcfs, _, fview = _table2_queue(FCFS())
    assert fcfs.queue.select(fcfs, fview).id == 1  # FCFS would serve the oldest


def test_queue_order_and_removal():
    inst, _, view = _table2_queue(UrgencyQueue())
    order = []
    while len(inst.queue):
        cs = inst.queue.select(inst, view)
        order.append(cs.id)
        inst.queue.remove(cs, released=True)
    assert order[:2] == [6, 7] and set(order[2:4]) == {3, 5} and order[4:] == [1, 2, 4]  # by urgency
    assert inst.queue.select(inst, view) is None


def test_calls_without_deadline_are_served_last_in_fcfs_order():
    inst = instance("m", queue=UrgencyQueue())
    view = view_of(inst, now=10.0)
    free1, free2 = query(1), query(2)
    tight = query(3, deadline=100.0)
    for cs in (call(1, free1, {inst: 1.0}, enqueued=1.0), call(2, free2, {inst: 1.0}, enqueued=2.0),
               call(3, tight, {inst: 1.0}, enqueued=3.0)):
        cs.t_comp = 1.0
        inst.queue.push(cs)
    got = []
    while len(inst.queue):
        cs = inst.queue.select(inst, view)
        got.append(cs.id)
        inst.queue.remove(cs, released=True)
    assert got == [3, 1, 2]
    assert inst.queue.urgency_of(free1.inflight[1], view) == -math.inf


def test_budgets_of_a_query_sum_to_its_remaining_deadline():
    a100, a6000 = instance("a100", "A100-80G", UrgencyQueue()), instance("a6000", "A6000", UrgencyQueue())
    expected = [CallEstimate("revise", 6000, 80, 2.7), CallEstimate("evaluate", 900, None, 4.5)]
    qs = query(1, arrival=0.0, deadline=300.0, program=Program(expected=expected))
    qs.progressed = 40.0
    view = view_of(a100, a6000, queries=[qs], now=55.0)
    inflight = [call(1, qs, {a100: 10.0, a6000: 26.0}), call(2, qs, {a100: 1.0, a6000: 3.0}),
                call(3, qs, {a100: 0.2, a6000: 0.5})]
    budgets = [a100.queue.budget(cs, view) for cs in inflight]
    # Eq. 5 for the expected calls, with the same denominator
    costs, future = remaining_costs(qs, view, [a100, a6000])
    total = sum(costs.values()) + sum(c * n for c, n in future)
    future_budgets = [n * call_budget(300.0 - 40.0, c, total) for c, n in future]
    assert sum(budgets) + sum(future_budgets) == pytest.approx(260.0)
    # each in-flight call's share is its instance-averaged cost
    assert budgets[0] / budgets[1] == pytest.approx(18.0 / 2.0)
    assert costs[1] == pytest.approx(18.0) and costs[3] == pytest.approx(0.35)
    # the evaluate estimate asks the predictor (default 128 output tokens) for its length
    assert future[1][0] == pytest.approx((a100.cost.call_time(900, 128) + a6000.cost.call_time(900, 128)) / 2)


def test_budget_is_resplit_when_the_query_progresses():
    """Two parallel calls of query 1 share its remaining deadline; when one finishes, the
    other gets the whole remainder, counted from the progression: the call that led the
    queue falls behind query 2's call (the cached keys are recomputed)."""
    inst = instance("m", queue=UrgencyQueue())
    q1 = query(1, arrival=0.0, deadline=60.0, program=Program(first=[llm_node("x"), llm_node("y")]))
    q1.run.start()
    q2 = query(2, arrival=0.0, deadline=50.0)
    x = call(1, q1, {inst: 5.0}, node="x")
    call(2, q1, {inst: 5.0}, node="y")  # running elsewhere
    z = call(3, q2, {inst: 5.0})
    for cs in (x, z):
        cs.t_comp = 5.0
        inst.queue.push(cs)
    harness = harness_of(inst, queries=[q1, q2], now=10.0)
    view = harness.view
    # q1: 60·5/10 = 30 s for x; q2: 50 s for z alone
    assert inst.queue.budget(x, view) == pytest.approx(30.0)
    assert inst.queue.urgency_of(x, view) == pytest.approx(5 - (30 - 10))  # −15
    assert inst.queue.urgency_of(z, view) == pytest.approx(5 - (50 - 10))  # −35
    assert inst.queue.select(inst, view) is x
    # y finishes at t = 20: q1 progresses (the core sets `progressed`), x's budget is re-split
    q1.run.complete("y", NodeResult(output_tokens=10))
    del q1.inflight[2]
    q1.progressed = 20.0
    harness.at(21.0)
    assert inst.queue.budget(x, view) == pytest.approx(40.0)
    assert inst.queue.urgency_of(x, view) == pytest.approx(5 - (40 - 1))  # queued since 20: −34
    assert inst.queue.urgency_of(z, view) == pytest.approx(5 - (50 - 21))  # −24
    assert inst.queue.select(inst, view) is z
