"""The prefix_affinity dispatch policy on a hand-built cluster view."""

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
from flowserve.policies.prefix_affinity import PrefixAffinity, expected_finish
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b")


def harness_with(names: list[str]) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b"), COST, FCFS()) for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def view_with(names: list[str]) -> tuple[ClusterView, list[InstanceState]]:
    harness, insts = harness_with(names)
    return harness.view, insts


def call(prompt: tuple[int, ...], out: int = 16) -> CallState:
    return call_state(LLMCall(1, 1, "n", "s", "w", prompt, out, out))


PREFIX = tuple(range(2000))


def test_expected_finish_adds_queued_work_and_own_time() -> None:
    assert expected_finish(1.5, 0.25) == 1.75


def test_registered_and_validated() -> None:
    assert DISPATCH_POLICIES["prefix_affinity"] is PrefixAffinity
    assert make_dispatch("prefix_affinity", {"load_guard": "3"}).load_guard == 3.0
    with pytest.raises(ConfigError, match="load_guard"):
        make_dispatch("prefix_affinity", {"load_guard": 0.5})
    with pytest.raises(ConfigError, match="near_tie"):
        make_dispatch("prefix_affinity", {"near_tie": 1.0})


def test_goes_where_the_longest_prefix_is_cached() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    view = h.view
    h.prefix_index.add(PREFIX[:500], "a", 0.0)
    h.prefix_index.add(PREFIX, "b", 0.0)
    a.outstanding, b.outstanding, c.outstanding = 0.0, 0.2, 0.0
    assert PrefixAffinity().choose(call(PREFIX + (9,)), [a, b, c], view) is b


def test_near_ties_go_to_the_least_outstanding_work() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    h.prefix_index.add(PREFIX, "a", 0.0)
    h.prefix_index.add(PREFIX[:1900], "b", 0.0)  # within 10% of a's 2000
    a.outstanding, b.outstanding = 0.3, 0.1
    assert PrefixAffinity(near_tie=0.1).choose(call(PREFIX + (9,)), [a, b], view) is b
    assert PrefixAffinity(near_tie=0.01).choose(call(PREFIX + (9,)), [a, b], view) is a


def test_no_useful_match_explores_the_least_loaded() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    h.prefix_index.add(PREFIX[:8], "a", 0.0)  # below min_match
    a.outstanding, b.outstanding = 0.3, 0.1
    assert PrefixAffinity(min_match=16).choose(call(PREFIX), [a, b], view) is b


def test_load_guard_moves_a_hot_prefix_off_an_overloaded_instance() -> None:
    h, (a, b) = harness_with(["a", "b"])
    view = h.view
    h.prefix_index.add(PREFIX, "a", 0.0)
    cs = call(PREFIX + (9,))
    cached_t = COST.call_time(2001, 16, 2000)
    cold_t = COST.call_time(2001, 16, 0)
    # the guard compares expected finishes: a (queue + cached call) vs 2 × b (idle, cold call)
    a.outstanding = 2 * cold_t - cached_t - 0.01
    assert PrefixAffinity(load_guard=2.0).choose(cs, [a, b], view) is a
    a.outstanding = 2 * cold_t - cached_t + 0.01
    assert PrefixAffinity(load_guard=2.0).choose(cs, [a, b], view) is b
    assert PrefixAffinity(load_guard=3.0).choose(cs, [a, b], view) is a
