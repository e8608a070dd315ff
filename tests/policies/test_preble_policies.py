"""Preble: formulas against hand-computed values, E2 decisions on crafted trees, the
prefix_groups queue, and the index's history, LRU and garbage collection."""

from __future__ import annotations

import math

import pytest
from helpers import call_state as tracked

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import CallState
from flowserve.errors import ConfigError
from flowserve.policies import make_dispatch, queue_factory
from flowserve.policies.preble import PrebleE2, Routed
from flowserve.policies.preble_costs import (
    doubled,
    eviction_cost,
    group_quota,
    is_decode_unit,
    load_cost,
    overloaded,
    priority_group,
    queueing_time,
    run_cost,
    run_window,
    should_exploit,
)
from flowserve.policies.prefix_groups import PrefixGroups
from flowserve.profiles.cost_model import cost_model_for
from flowserve.profiles.instance import instance_profile
from flowserve.types.events import CallFinished
from flowserve.types.specs import EngineParams, InstanceSpec
from flowserve.types.work import LLMCall

A, B, C = "a", "b", "c"


def toks(*runs: tuple[int, int]) -> tuple[int, ...]:
    """Runs of (marker, length): a marker token then length-1 filler tokens."""
    out: tuple[int, ...] = ()
    for marker, n in runs:
        out += (-marker,) + tuple(range(n - 1))
    return out


def specs(n: int = 3) -> list[InstanceSpec]:
    return [InstanceSpec(name, "A6000", "mistral-7b", engine=EngineParams()) for name in "abc"[:n]]


def harness_with(policy: PrebleE2, n: int = 3, queue: str = "fcfs") -> PolicyHarness:
    """The instances and the index as the core builds them for this policy."""
    return PolicyHarness.for_cluster(specs(n), queue_factory(queue), prefix_index=PrefixIndex(policy.window_s))


def call_state(i: int, prompt: tuple[int, ...], out: int = 10) -> CallState:
    return tracked(LLMCall(i, i, "n", "s", "w", prompt, predicted_output=out, max_tokens=out))


def set_outstanding(h: PolicyHarness, work: dict[str, float]) -> None:
    """Predicted work already promised to each instance (the core's account)."""
    by_name = {i.name: i for i in h.candidates()}
    for name, w in work.items():
        by_name[name].outstanding = w


# --------------------------------------------------------------------------- formulas


def test_exploit_threshold_is_strictly_more_than_half():
    assert should_exploit(501, 1000)
    assert not should_exploit(500, 1000)
    assert not should_exploit(0, 10)


def test_load_memory_run_costs_hand_computed():
    # L = Σ PT + |W|·DT = (0.5 + 0.25) + 2·0.1
    assert load_cost(0.75, 2, 0.1) == pytest.approx(0.95)
    # M = Σ PT_j·N_j = 0.2·3 + 0.05·1
    assert eviction_cost([(0.2, 3), (0.05, 1)]) == pytest.approx(0.65)
    cost = cost_model_for("A6000", "mistral-7b")
    assert run_cost(cost, 0) == 0.0
    assert run_cost(cost, 1000, 500) == pytest.approx(cost.prefill_time(1000, 500))
    # roofline by hand: 1000 tokens of Mistral-7B on an A6000 are compute-bound:
    # (2·7.24e9·1000 + 4·32·4096·(1000·1001/2)) / (154.8e12·0.55) + 3 ms overhead
    flops = 2 * 7.24e9 * 1000 + 4 * 32 * 4096 * (1000 * 1001 / 2)
    assert run_cost(cost, 1000) == pytest.approx(flops / (154.8e12 * 0.55) + 0.003, rel=1e-6)


def test_triggers():
    assert overloaded(1.6, 1.0, 1.5) and not overloaded(1.5, 1.0, 1.5)
    assert doubled([1, 1, 1], [2, 2, 2]) and not doubled([1, 1, 1], [1.9, 2, 2])
    assert not doubled([1, 1], [5, 5, 5])  # too few samples in the earlier half
    assert is_decode_unit(0.01, 0.5) and not is_decode_unit(0.5, 0.01)


def test_priority_group_formula():
    assert priority_group(63, 100, 10) == 6  # the paper's example
    assert priority_group(0, 100, 10) == 0
    assert priority_group(100, 100, 10) == 9
    assert priority_group(60, 100, 10) == 5  # ceil(6.0) − 1
    assert priority_group(1, 100, 10) == 0
    assert [group_quota(g) for g in (0, 6, 9)] == [10, 70, 100]


# --------------------------------------------------------------------------- index


def test_index_history_lru_and_gc():
    idx = PrefixIndex(window_s=10.0)
    p1, p2 = toks((1, 100), (2, 50)), toks((1, 100), (3, 50))
    idx.add(p1, A, 0.0)
    idx.add(p2, A, 1.0)
    path, _, _ = idx.match_path(p1)
    shared, leaf1 = path
    assert shared.depth == 100 and idx.requests(shared, A, 1.0) == 2
    assert idx.requests(leaf1, A, 1.0) == 1 and idx.requests(leaf1, B, 1.0) == 0
    assert idx.requests(shared, A, 10.5) == 1  # the request at t=0 left the window
    # LRU: leaf of p1 oldest, then leaf of p2, then the shared ancestor (touched last)
    order = list(idx.lru_nodes(A))
    assert order[0] is leaf1 and order[-1] is shared
    assert idx.cached_tokens[A] == 200
    # evicted but used within the window: stays in the tree without holders
    idx.discard(A, p1, 100, now=2.0)
    assert leaf1.parent is not None and not leaf1.data
    assert idx.cached_tokens[A] == 150
    assert idx.match_by_instance(p1)[1] == {A: 100}
    # a later update past the window collects it
    idx.add(toks((4, 10)), B, 20.0)
    assert leaf1.parent is None
    idx.discard(A, p2, 0, now=20.0)  # unused for a window: dropped at once
    assert idx.match_path(p2)[0] == []
    assert idx.cached_tokens[A] == 0


def test_index_split_keeps_history_and_lru():
    idx = PrefixIndex()
    p1 = toks((1, 100))
    idx.add(p1, A, 0.0)
    idx.add(p1[:40] + (99, 98), B, 1.0)  # splits the 100-token edge after 40 tokens
    path, _, _ = idx.match_path(p1)
    upper, _ = path
    assert upper.depth == 40 and upper.data == {A, B}
    assert idx.requests(upper, A, 1.0) == 1 and idx.requests(upper, B, 1.0) == 1
    assert upper in list(idx.lru_nodes(A)) and idx.cached_tokens[A] == 100


# --------------------------------------------------------------------------- E2


def test_exploit_sends_to_the_key_portion_holder_least_loaded():
    policy = PrebleE2(rebalance=False)
    h = harness_with(policy)
    idx, view = h.prefix_index, h.view
    sys_, doc = (1, 100), (2, 1000)
    idx.add(toks(sys_), C, 0.0)  # everyone's system prompt: short
    idx.add(toks(sys_, doc), A, 0.0)  # the key portion (the 1000-token node) on a and b
    idx.add(toks(sys_, doc), B, 0.0)
    cands = h.candidates()
    set_outstanding(h, {A: 5.0, B: 1.0})
    cs = call_state(1, toks(sys_, doc, (3, 50)))
    assert policy.choose(cs, cands, view).name == B
    assert policy.stats["exploit"] == 1
    # matched 1100 of 2200 tokens: not more than the rest → explore
    cs2 = call_state(2, toks(sys_, doc, (4, 1100)))
    policy.choose(cs2, cands, view)
    assert policy.stats["explore"] == 1


def test_explore_uses_l_plus_m_plus_r():
    policy = PrebleE2(rebalance=False, pd_balance=False)
    h = harness_with(policy, 2)
    idx, view = h.prefix_index, h.view
    cands = h.candidates()
    a, b = cands
    cap = a.kv_capacity
    # a caches a short prefix (R smaller there) but is loaded in the window (L);
    # b is empty: L = M = 0, R = full prefill
    idx.add(toks((1, 300)), A, 0.0)
    prompt = toks((1, 300), (2, 700))
    policy._window(A, 0.0).routed.append((0.0, 10.0))
    policy._window(A, 0.0).prefill_s = 10.0
    h.at(1.0)
    r_a, r_b = run_cost(a.cost, 700, 300), run_cost(b.cost, 1000)
    assert policy.load(a, 1.0) == pytest.approx(10.0) and policy.load(b, 1.0) == 0.0
    assert policy.eviction_cost(a, 700, set(), view) == 0.0  # plenty of room
    assert policy.choose(call_state(1, prompt), cands, view) is b
    # without the load, a's smaller R wins
    policy2 = PrebleE2(rebalance=False, pd_balance=False)
    h2 = harness_with(policy2, 2)
    h2.prefix_index.add(toks((1, 300)), A, 0.0)
    assert r_a < r_b
    assert policy2.choose(call_state(1, prompt), h2.candidates(), h2.view).name == A
    assert cap > 100_000


def test_memory_cost_counts_evicted_nodes_times_their_requests():
    policy = PrebleE2()
    h = harness_with(policy, 1)
    idx, view = h.prefix_index, h.view
    (a,) = h.candidates()
    cap = a.kv_capacity
    old, hot = toks((1, 1000)), toks((2, cap - 1000))
    idx.add(old, A, 0.0)
    idx.add(old, A, 1.0)  # two requests used the old node
    idx.add(hot, A, 2.0)  # the instance is now full
    h.at(3.0)
    pt = a.cost.prefill_time(1000)
    # 500 more tokens evict the LRU node (old, 1000 tokens, 2 requests): M = PT·2
    assert policy.eviction_cost(a, 500, set(), view) == pytest.approx(2 * pt)
    # keeping it (it is on the request's own path) evicts the next one instead
    path, _, _ = idx.match_path(old)
    assert policy.eviction_cost(a, 500, set(path), view) == pytest.approx(a.cost.prefill_time(cap - 1000))
    h.at(500.0)  # out of the window: nobody would pay for recomputing it
    assert policy.eviction_cost(a, 500, set(), view) == 0.0


def test_rebalance_redirects_from_an_overloaded_holder():
    policy = PrebleE2(t_hbal=1.5)
    h = harness_with(policy, 2)
    idx, view = h.prefix_index, h.view
    cands = h.candidates()
    key = (1, 1800)
    idx.add(toks(key), A, 0.0)
    prompt = toks(key, (2, 200))
    set_outstanding(h, {A: 10.0, B: 0.0})  # a's queue far exceeds a copy of the prefix on b
    assert policy.choose(call_state(1, prompt), cands, view).name == B
    assert policy.stats["rebalanced"] == 1
    set_outstanding(h, {A: 0.05, B: 0.0})  # cheaper to wait than to copy 1800 tokens
    assert policy.choose(call_state(2, prompt), cands, view).name == A


def test_replication_when_ttft_doubles_within_the_window():
    policy = PrebleE2(window_s=10.0, rebalance=False)
    h = harness_with(policy, 2)
    idx, view = h.prefix_index, h.view
    cands = h.candidates()
    key = (1, 3000)
    idx.add(toks(key), A, 0.0)
    prompt = toks(key, (2, 100))
    timeline = [(0.0, 0.5), (0.5, 0.5), (1.0, 0.5), (5.5, 3.0), (6.0, 3.0), (6.5, 3.0)]
    for i, (t, ttft) in enumerate(timeline, start=1):
        h.at(t)
        assert policy.choose(call_state(i, prompt), cands, view).name == A
        h.at(t + ttft)
        policy.observe(CallFinished(t + ttft, i, A, 5, first_token=t + ttft), view)
    assert policy.stats["replicated"] == 1
    set_outstanding(h, {A: 1.0, B: 0.0})
    h.at(9.0)
    assert policy.choose(call_state(99, prompt), cands, view).name == B  # the replica takes load
    h.at(30.0)  # the replica expired with the window; a holds it, b does not
    assert policy.choose(call_state(100, toks(key, (3, 100))), cands, view).name == A


def test_pd_balance_prefers_a_decode_dominated_instance():
    policy = PrebleE2(rebalance=False)
    h = harness_with(policy, 2)
    view = h.view
    cands = h.candidates()
    b = cands[1]
    for k in range(3):  # b runs three decode units (fully cached, long outputs)
        policy._routed[100 + k] = Routed(B, 0.0, 0.0, True, None)
        b.running[100 + k] = None  # type: ignore[assignment]
    policy._window(B, 0.0).routed.append((0.0, 0.01))
    policy._window(B, 0.0).prefill_s = 0.01  # b slightly busier by L
    prompt = toks((5, 2000))  # a prefill unit: long uncached prompt, short output
    assert policy.choose(call_state(1, prompt, out=2), cands, view) is b
    assert policy.stats["pd_balanced"] == 1
    off = PrebleE2(rebalance=False, pd_balance=False)
    h2 = harness_with(off, 2)
    off._window(B, 0.0).routed.append((0.0, 0.01))
    off._window(B, 0.0).prefill_s = 0.01
    assert off.choose(call_state(1, prompt, out=2), h2.candidates(), h2.view).name == A


def test_e2_parameters_are_validated():
    with pytest.raises(ConfigError, match="t_hbal"):
        make_dispatch("preble_e2", {"t_hbal": "0.5"})
    with pytest.raises(ConfigError, match="window_s"):
        make_dispatch("preble_e2", {"window_s": "0"})
    p = make_dispatch("preble_e2", {"replicate": "off", "pd_balance": "on", "window_s": "60"})
    assert not p.replicate and p.pd_balance and p.window_s == 60


# --------------------------------------------------------------------------- prefix_groups


def test_prefix_groups_quota_and_fcfs_inside_groups():
    h = harness_with(PrebleE2(), 1, queue="prefix_groups")
    idx = h.prefix_index
    (inst,) = h.candidates()
    q = inst.queue
    assert isinstance(q, PrefixGroups)
    idx.add(toks((1, 63)), A, 0.0)
    hi = [call_state(i, toks((1, 63), (i + 10, 37))) for i in range(25)]  # 63% cached → group 6
    lo = [call_state(100 + i, toks((i + 500, 100))) for i in range(3)]  # nothing cached → 0
    for cs in lo + hi:
        cs.instance = A
        q.push(cs)
    assert q.group_of(hi[0]) == 6 and q.group_of(lo[0]) == 0
    order = []
    while len(q):
        cs = q.select(inst, h.view)
        q.remove(cs, released=True)
        order.append(cs.id)
    # group 6 releases its quota of 70 > 25 first, in arrival order; then group 0
    assert order == [cs.id for cs in hi] + [cs.id for cs in lo]


def test_prefix_groups_quota_rotates_to_lower_groups():
    q = PrefixGroups(groups=2)
    q._view = type("V", (), {"prefix_index": PrefixIndex()})()  # an empty index: all group 0
    calls = [call_state(i, toks((i + 1, 10))) for i in range(30)]
    for cs in calls:
        cs.instance = A
        q.push(cs)
    # force half of them into group 1 to exercise quotas 20 (g=1) and 10 (g=0)
    for cs in calls[:25]:
        q.remove(cs, released=False)
        q._q[1][cs.id] = cs
        q._group[cs.id] = 1
    released = []
    while len(q):
        cs = q.select(None, None)  # type: ignore[arg-type]
        q.remove(cs, released=True)
        released.append(q_group := (1 if cs.id < 25 else 0))
        assert q_group in (0, 1)
    assert released[:20] == [1] * 20 and released[20:25] == [0] * 5 and released[25:] == [1] * 5


def test_prefix_groups_makes_the_core_keep_an_index_with_any_dispatch():
    core = SchedulerCore(specs(2), make_dispatch("round_robin"), queue_factory("prefix_groups"),
                         instance_profile)
    assert core.keeps_prefix_index
    with pytest.raises(ConfigError, match="prefix index"):
        PrefixGroups().bind(type("V", (), {"prefix_index": None})())  # type: ignore[arg-type]


def test_group_count_validated():
    with pytest.raises(ConfigError, match="groups"):
        queue_factory("prefix_groups", {"groups": "0"})
    assert math.isclose(PrefixGroups(4).groups, 4)


def test_replication_watches_queueing_time_over_a_window_that_scales_with_the_run() -> None:
    assert queueing_time(1.5, 0.4) == pytest.approx(1.1)  # TTFT less its own prefill
    assert queueing_time(0.3, 0.4) == 0.0  # a cold first prefill is not waiting
    assert run_window(180.0, 40.0) == 40.0  # a 40 s run: its halves are 20 s each
    assert run_window(180.0, 500.0) == 180.0  # Preble's H once the run is longer
    assert run_window(180.0, 0.2) == 1.0  # at least the floor
