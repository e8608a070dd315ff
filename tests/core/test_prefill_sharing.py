"""Shared-prefix prefills (`flowserve.core._leaders`): one leader computes a long uncached
prefix; calls that share it wait and then go to the leader's instance."""

from __future__ import annotations

import random

from helpers import ScriptedDriver, ScriptProgram, live_spec, llm, query
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.core import CallStatus, SchedulerCore
from flowserve.core._leaders import DEFAULT_SHARING, PrefillSharing, shares_prefix
from flowserve.graph.nodes import LLMNode
from flowserve.graph.prompt import Toks
from flowserve.policies import make_dispatch, queue_factory
from flowserve.policies.round_robin import RoundRobin
from flowserve.profiles.instance import instance_profile
from flowserve.types.events import CallFailed, InstanceDown, InstanceUp, PrefillDone

PREFIX = 1000  # tokens every prompt below shares (ids 0..999)


class IndexedRoundRobin(RoundRobin):
    """Round robin that keeps the router's index: it sends a second copy of a prefix elsewhere."""

    needs_prefix_index = True


def core_with(specs, sharing: PrefillSharing | None = DEFAULT_SHARING, dispatch=None, **kw) -> SchedulerCore:
    return SchedulerCore(specs, dispatch or IndexedRoundRobin(), queue_factory("fcfs"), instance_profile,
                         prefill_sharing=sharing, **kw)


def shared(key: str, tail: int, n_tail: int = 100) -> LLMNode:
    """A call whose prompt is the shared 1000-token prefix and a tail of its own."""
    ids = tuple(range(PREFIX)) + tuple(range(10**6 * tail, 10**6 * tail + n_tail))
    return LLMNode(key, "s", (Toks(ids),), 10)


def test_shares_prefix_by_hand() -> None:
    assert shares_prefix((1, 2, 3, 4), (1, 2, 9), 2)
    assert not shares_prefix((1, 2, 3, 4), (1, 2, 9), 3)
    assert shares_prefix((1, 2), (1, 2, 3), 2)
    assert not shares_prefix((1, 2), (1, 2, 3), 2.5)  # a fractional need rounds up
    assert shares_prefix((), (1,), 0)
    assert not shares_prefix((5,), (6,), 1)


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40),
       st.floats(0, 45, allow_nan=False))
def test_shares_prefix_matches_a_plain_scan(a: list[int], b: list[int], need: float) -> None:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert shares_prefix(tuple(a), tuple(b), need) == (n >= need)


def test_a_follower_waits_for_the_leader_then_goes_where_the_prefix_is_cached() -> None:
    core = core_with([live_spec("a"), live_spec("b")], dispatch=make_dispatch("prefix_affinity"))
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([shared("lead", 1)])))
    d.arrive(query(ScriptProgram([shared("next", 2)])))
    assert [s.instance for s in d.sent] == ["a", "a"]  # the policy sends it to a: no waiting


def test_a_follower_waits_rather_than_computing_a_second_copy_elsewhere() -> None:
    core = core_with([live_spec("a"), live_spec("b")])  # round robin would alternate
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([shared("lead", 1)])))
    (lead,) = d.sent
    assert lead.instance == "a"
    follower_q = query(ScriptProgram([shared("follow", 2)]))
    d.arrive(follower_q)
    assert len(d.sent) == 1  # waiting for a's prefill of the shared 1000 tokens
    (fid,) = core.calls_of(follower_q.id)
    assert core.call_status(fid) is CallStatus.WAITING
    d.feed(PrefillDone(0.5, lead.call.id, "a"))
    assert core.call_status(lead.call.id) is CallStatus.RUNNING
    assert len(d.sent) == 2  # dispatched anew once a caches the prefix
    d.run_all()
    assert len(d.ended) == 2


def test_without_sharing_the_second_copy_is_computed_elsewhere() -> None:
    core = core_with([live_spec("a"), live_spec("b")], sharing=None)
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([shared("lead", 1)])))
    d.arrive(query(ScriptProgram([shared("follow", 2)])))
    assert [s.instance for s in d.sent] == ["a", "b"]
    assert not core.wants_prefill_done
    # without the router's index the core cannot know what is cached: no leaders either
    assert not core_with([live_spec("a")], dispatch=make_dispatch("round_robin")).wants_prefill_done
    # the peer routers dispatch every request at once, as they do outside flowserve
    assert not core_with([live_spec("a")], dispatch=make_dispatch("llmd")).wants_prefill_done
    assert core_with([live_spec("a")], dispatch=make_dispatch("flowserve")).wants_prefill_done


def test_short_or_weakly_shared_prompts_never_wait() -> None:
    core = core_with([live_spec("a"), live_spec("b")])
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([shared("lead", 1)])))
    d.arrive(query(ScriptProgram([llm("short", n=200)])))  # shorter than min_tokens
    d.arrive(query(ScriptProgram([shared("long", 3, n_tail=1500)])))  # shares 1000 of 2500 tokens: < 50%
    assert len(d.sent) == 3
    strict = core_with([live_spec("a"), live_spec("b")], sharing=PrefillSharing(min_tokens=2000))
    d2 = ScriptedDriver(strict)
    d2.arrive(query(ScriptProgram([shared("lead", 1)])))
    d2.arrive(query(ScriptProgram([shared("follow", 2)])))
    assert len(d2.sent) == 2  # a 1100-token prompt is below this core's minimum


def test_a_failed_leader_releases_its_followers_elsewhere() -> None:
    core = core_with([live_spec("a"), live_spec("b")], max_retries=0)
    d = ScriptedDriver(core)
    lead_q = query(ScriptProgram([shared("lead", 1)]))
    d.arrive(lead_q)
    d.arrive(query(ScriptProgram([shared("follow", 2)])))
    lead = d.sent[0]
    d.inflight.pop(lead.call.id)
    d.feed(CallFailed(1.0, lead.call.id, "a", "boom", retryable=False))
    assert "boom" in d.ended[lead_q.id].reason
    assert len(d.sent) == 2  # the follower did not wait forever


def test_a_lost_instance_releases_the_followers_of_its_leaders() -> None:
    core = core_with([live_spec("a"), live_spec("b")])
    d = ScriptedDriver(core)
    d.arrive(query(ScriptProgram([shared("lead", 1)])))
    d.arrive(query(ScriptProgram([shared("follow", 2)])))
    assert len(d.sent) == 1
    d.feed(InstanceDown(1.0, "a"))
    assert {s.instance for s in d.sent[1:]} == {"b"}
    d.run_all()
    assert len(d.ended) == 2 and core.open_calls == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6))
def test_no_query_is_lost_with_shared_prefixes(seed: int) -> None:
    """Many calls sharing prefixes under random finishes, prefill reports, failures and
    instance churn: every query ends exactly once and nothing is left waiting."""
    rng = random.Random(seed)
    core = core_with([live_spec("a", 2), live_spec("b", 1)], max_retries=2,
                     dispatch=rng.choice([IndexedRoundRobin(), make_dispatch("prefix_affinity")]))
    d = ScriptedDriver(core)
    arrived = []
    for i in range(rng.randint(2, 8)):
        q = query(ScriptProgram([shared(f"c{i}", rng.randint(1, 3))]))
        arrived.append(q.id)
        d.arrive(q)
    down: set[str] = set()
    for _ in range(300):
        if not d.inflight and not core.open_queries:
            break
        r = rng.random()
        if r < 0.06 and not down:
            name = rng.choice("ab")
            down.add(name)
            d.feed(InstanceDown(d.t, name))
        elif r < 0.12 and down:
            d.feed(InstanceUp(d.t, live_spec(down.pop(), 2)))
        elif d.inflight:
            cid = rng.choice(list(d.inflight))
            sc = d.inflight[cid]
            if rng.random() < 0.3:
                d.feed(PrefillDone(d.t, cid, sc.instance))
            elif rng.random() < 0.15:
                d.inflight.pop(cid)
                d.feed(CallFailed(d.t, cid, sc.instance, "boom", retryable=rng.random() < 0.7))
            else:
                d.finish(cid)
        elif down:
            d.feed(InstanceUp(d.t, live_spec(down.pop(), 2)))
    assert set(d.ended) == set(arrived)
    assert core.open_queries == 0 and core.open_calls == 0
