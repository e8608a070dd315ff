"""What the view hands policies is read-only and live: instances, queries (and their
graphs), the predictor and the prefix index are proxies or readers of the core's own
state — they follow it, and nothing set on them reaches it."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from helpers import TEST_WORKFLOWS, ScriptedDriver, ScriptProgram, live_spec, llm
from helpers import query as make_query
from hexgen_helpers import instance, query

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.policy import DispatchPolicy
from flowserve.core.readers import IndexReader, InstanceView, PredictorReader, QueryView
from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import CallState, InstanceState
from flowserve.policies import queue_factory
from flowserve.profiles.instance import instance_profile
from flowserve.types.work import LLMCall


def test_instances_are_live_read_only_proxies():
    a = instance("a")
    h = PolicyHarness([a], prefix_index=PrefixIndex())
    view = h.view
    seen = view.instances["a"]
    assert isinstance(seen, InstanceView) and view.up_instances() == [seen]
    a.outstanding = 2.5  # the core (or a test) changes the state: the proxy follows it
    assert seen.outstanding == 2.5 and seen.name == "a" and seen.serves(a.spec.model) and not seen.serves("x")
    cs = CallState.of(LLMCall(1, 1, "n", "s", "w", tuple(range(100)), 8, 8), query(1))
    h.enqueue(cs, a)
    h.release(cs, a)
    assert dict(seen.running) == {1: cs} and isinstance(seen.running, MappingProxyType)
    with pytest.raises(AttributeError):
        seen.outstanding = 0.0
    with pytest.raises(TypeError):
        seen.running[2] = cs  # type: ignore[index]
    with pytest.raises(AttributeError):
        seen.extra = 1  # type: ignore[attr-defined]
    assert view.t_comp(cs, seen) == view.t_comp(cs, a)  # the view's estimates take either
    a.peer_running, a.peers = 3, 1  # peer replicas' share reads through too (`replica_share`)
    assert (seen.peer_running, seen.peers, seen.peer_queued, seen.peer_outstanding) == (3, 1, 0, 0.0)


def test_queries_predictor_and_index_are_readers():
    qs = query(7, deadline=10.0)
    index = PrefixIndex()
    h = PolicyHarness([instance("a")], queries=[qs], prefix_index=index)
    view = h.view
    q = view.queries[7]
    assert isinstance(q, QueryView) and q.id == 7 and q.query.deadline == 10.0 and 7 in view.queries
    assert q.path_service(()) == 0.0 and isinstance(q.run.results, MappingProxyType)
    with pytest.raises(AttributeError):
        q.failed = True
    assert isinstance(view.predictor, PredictorReader) and view.predictor.predict("wf", "s") > 0
    assert not hasattr(view.predictor, "observe")
    index.add(tuple(range(64)), "a", 0.0)  # the harness's live index; the view reads it
    reader = view.prefix_index
    assert isinstance(reader, IndexReader) and reader.match_by_instance(tuple(range(64)))[1] == {"a": 64}
    assert reader.cached_tokens["a"] == 64 and not hasattr(reader, "add")


def test_the_core_hands_policies_read_only_instances_through_the_view():
    seen: list[tuple[list, list]] = []

    class Peek(DispatchPolicy):
        def choose(self, cs, candidates, view):
            seen.append((list(view.instances.values()), list(candidates)))
            return candidates[0]

    core = SchedulerCore([live_spec("a"), live_spec("b")], Peek(), queue_factory("fcfs"), instance_profile,
                         workflows=TEST_WORKFLOWS)
    d = ScriptedDriver(core)
    d.arrive(make_query(ScriptProgram([llm("A")])))
    [(through_view, candidates)] = seen
    assert [type(i) for i in through_view] == [InstanceView, InstanceView]
    assert [type(i) for i in candidates] == [InstanceState, InstanceState]  # the core's own: a choice is one of them
    assert d.sent[0].instance == "a"
