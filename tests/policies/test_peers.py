"""The peer routers' dispatch policies on hand-built cluster views, with hand-computed choices."""

from __future__ import annotations

import pytest
from helpers import call_state

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.policies import DISPATCH_POLICIES, make_dispatch
from flowserve.policies.fcfs import FCFS
from flowserve.policies.power_of_two import PowerOfTwo
from flowserve.policies.sglang import SglangCacheAware, sglang_imbalanced
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b")
_ids = iter(range(1000, 10**6))


def harness_with(names: list[str]) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b"), COST, FCFS()) for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def view_with(names: list[str]) -> tuple[ClusterView, list[InstanceState]]:
    harness, insts = harness_with(names)
    return harness.view, insts


def call(prompt: tuple[int, ...], out: int = 16) -> CallState:
    return call_state(LLMCall(next(_ids), 1, "n", "s", "w", prompt, out, out))


def load(inst: InstanceState, queued: int = 0, running: int = 0, tokens: int = 100) -> None:
    for _ in range(queued):
        inst.queue.push(call(tuple(range(tokens))))
    for _ in range(running):
        cs = call(tuple(range(tokens)))
        inst.running[cs.id] = cs


P = tuple(range(1000))


def test_registered_with_defaults_and_validated() -> None:
    for name, cls in (("sglang_cache_aware", SglangCacheAware), ("power_of_two", PowerOfTwo)):
        assert DISPATCH_POLICIES[name] is cls
    s = make_dispatch("sglang_cache_aware")
    assert (s.cache_threshold, s.balance_abs_threshold, s.balance_rel_threshold) == (0.5, 32, 1.0001)
    d = make_dispatch("llmd")  # a shipped scoring profile
    assert [(p.name, p.weight) for p in d.profile.scorers] == [("prefix_hit", 3.0), ("kv_free", 2.0),
                                                              ("queue_depth", 2.0)]
    assert not d.shares_prefills and d.prefix_window_s == 0.0
    assert [p.weight for p in make_dispatch("dynamo_kv").profile.scorers] == [1.0, 1.0]
    with pytest.raises(ConfigError, match="cache_threshold"):
        make_dispatch("sglang_cache_aware", {"cache_threshold": "1.5"})
    with pytest.raises(ConfigError, match="weight must be a finite number ≥ 0"):
        make_dispatch("llmd", {"queue_depth.weight": "-1"})


def test_formulas_by_hand() -> None:
    assert sglang_imbalanced(40, 5, 32, 1.0001)  # 35 > 32 and 40 > 5.0005
    assert not sglang_imbalanced(36, 5, 32, 1.0001)  # 31 ≤ 32
    assert not sglang_imbalanced(0, 0, -1, 1.0001)  # 0 > 0 fails


def test_sglang_follows_its_own_tree_above_the_threshold_else_the_smallest_tree() -> None:
    view, (a, b) = view_with(["a", "b"])
    pol = SglangCacheAware()
    first = pol.choose(call(P), [a, b], view)  # empty trees: the smallest (tie → first)
    assert first is a and pol.tree.cached_tokens["a"] == 1000
    # 1000 of 1100 tokens matched on a (91% > 50%): a again
    assert pol.choose(call(P + tuple(range(5000, 5100))), [a, b], view) is a
    # 400 of 1000 matched (40% ≤ 50%): the smaller tree, b
    assert pol.choose(call(P[:400] + tuple(range(7000, 7600))), [a, b], view) is b
    assert pol.stats == {"cache": 1, "smallest_tree": 2, "shortest_queue": 0}


def test_sglang_shortest_queue_when_imbalanced() -> None:
    view, (a, b, c) = view_with(["a", "b", "c"])
    pol = SglangCacheAware()
    pol.choose(call(P), [a, b, c], view)  # P now in a's tree
    load(a, queued=30, running=10)  # 40 in flight
    load(b, running=5)
    load(c, running=7)
    # 40 − 5 = 35 > 32 and 40 > 5: imbalanced → b (shortest), despite a's prefix
    assert pol.choose(call(P + (1,)), [a, b, c], view) is b
    load(b, running=4)  # b 9: 40 − 7 = 33 > 32 → c is shortest now
    assert pol.choose(call(P + (2,)), [a, b, c], view) is c
    load(c, running=3)  # 40 − 9 = 31: balanced → the prefix holder, a
    assert pol.choose(call(P + (3,)), [a, b, c], view) is a


def test_sglang_trims_its_tree_lru() -> None:
    h, (a,) = harness_with(["a"])
    pol = SglangCacheAware(max_tree_tokens=1500)
    pol.choose(call(P), [a], h.view)
    pol.choose(call(tuple(range(5000, 6000))), [a], h.at(1.0))
    assert pol.tree.cached_tokens["a"] <= 1500
    assert pol.tree.match_by_instance(tuple(range(5000, 6000)))[1].get("a") == 1000  # the newer one stays


def test_llmd_weighs_prefix_3_kv_2_queue_2() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    a.kv_capacity = b.kv_capacity = 10_000
    h.prefix_index.add(P, "a", 0.0)
    load(a, queued=2)
    cs = call(P + tuple(range(5000, 5024)))  # 1024 tokens = 16 blocks, 15 cached on a
    # a: 3·15/16 + 2·1 + 2·0 = 4.8125; b: 0 + 2 + 2·1 = 4.0 → a
    assert make_dispatch("llmd").choose(cs, [a, b], view) is a
    load(a, queued=2)  # queue 4 vs 0: unchanged normalised score → a
    assert make_dispatch("llmd").choose(cs, [a, b], view) is a
    # a's KV 60% used by running calls: a = 2.8125 + 2·0.4 = 3.6125 < 4.0 → b
    load(a, running=1, tokens=5984)
    assert make_dispatch("llmd").choose(cs, [a, b], view) is b


def test_dynamo_trades_prefill_blocks_against_active_blocks() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    h.prefix_index.add(P, "a", 0.0)
    cs = call(P + tuple(range(5000, 5024)))  # 1024 tokens: 64 blocks, 1000 cached on a
    # a: 24/16 + 64 = 65.5; b: 1024/16 + 64 = 128 → a
    assert make_dispatch("dynamo_kv").choose(cs, [a, b], view) is a
    load(a, running=4, tokens=320)  # a: 1.5 + 4·20 + 64 = 145.5 > 128 → b
    assert make_dispatch("dynamo_kv").choose(cs, [a, b], view) is b
    # a weight of 3 on prefill: a 4.5 + 144 = 148.5; b 192 + 64 = 256 → a
    assert make_dispatch("dynamo_kv", {"prefill_blocks.weight": 3}).choose(cs, [a, b], view) is a


def test_power_of_two_takes_the_less_loaded_of_two_samples() -> None:
    view, insts = view_with(["a", "b", "c", "d"])
    for k, inst in enumerate(insts):
        load(inst, running=k)
    pol = PowerOfTwo(seed=3)
    import random
    rng = random.Random(3)
    for _ in range(20):
        i, j = rng.sample(range(4), 2)
        assert pol.choose(call(P), insts, view) is insts[min(i, j)]
    (only,) = insts[:1]
    assert pol.choose(call(P), [only], view) is only
