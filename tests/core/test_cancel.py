"""A query nobody waits for (QueryCancelled, issue 27 item 17): the core fails it, cancels
its running calls, drops its queued ones, and the freed room goes to the next query."""

import pytest
from helpers import TEST_WORKFLOWS, ScriptedDriver, ScriptProgram, live_spec, llm, query

from flowserve.core.scheduler import SchedulerCore
from flowserve.errors import FailureKind
from flowserve.policies import make_dispatch, queue_factory
from flowserve.profiles.instance import instance_profile
from flowserve.types.commands import CancelCall, QueryFailed, SendCall
from flowserve.types.events import QueryCancelled


@pytest.mark.parametrize("binding", ["ready", "late"])
def test_a_cancelled_query_frees_its_slot_for_the_next_query(binding: str) -> None:
    core = SchedulerCore([live_spec("a", max_inflight=1)], make_dispatch("least_load", {"binding": binding}),
                         queue_factory("fcfs"), instance_profile, workflows=TEST_WORKFLOWS)
    d = ScriptedDriver(core)
    gone = query(ScriptProgram([llm("A1"), llm("A2", base=500)]))
    waiting = query(ScriptProgram([llm("B", base=900)]))
    d.arrive(gone)
    d.arrive(waiting)
    [running] = d.inflight.values()
    assert running.call.query_id == gone.id
    cmds = d.feed(QueryCancelled(1.0, gone.id, "the client disconnected"))
    assert CancelCall(running.call.id, "a") in cmds
    failed = QueryFailed(gone.id, 1.0, "the client disconnected", FailureKind.CANCELLED)
    assert [c for c in cmds if isinstance(c, QueryFailed)] == [failed]
    # A2 never runs: the slot goes to B
    assert [c.call.query_id for c in cmds if isinstance(c, SendCall)] == [waiting.id]
    d.run_all()
    assert [s.call.node for s in d.sent] == ["A1", "B"]
    assert core.open_queries == 0 and core.open_calls == 0


def test_cancelling_an_unknown_or_finished_query_does_nothing() -> None:
    core = SchedulerCore([live_spec("a")], make_dispatch("round_robin"), queue_factory("fcfs"), instance_profile,
                         workflows=TEST_WORKFLOWS)
    d = ScriptedDriver(core)
    q = query(ScriptProgram([llm("A")]))
    d.arrive(q)
    d.run_all()
    assert d.feed(QueryCancelled(5.0, q.id)) == []
    assert d.feed(QueryCancelled(5.0, 10_000)) == []
