"""hexgen_wb and urgency inside the scheduler core, driven by hand-made events."""

from __future__ import annotations

import pytest

from flowserve.core import InstanceStatus, SchedulerCore
from flowserve.graph.plan import CallStep, Materializer, QueryPlan, Segment
from flowserve.graph.replay import PlanWorkflow
from flowserve.policies import queue_factory
from flowserve.policies.hexgen import HexgenWB
from flowserve.profiles.instance import instance_profile
from flowserve.types.commands import QueryDone, SendCall
from flowserve.types.events import CallFinished, QueryArrived
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, WorkflowRef

MODEL = "llama-3.1-70b"
MAT = Materializer()


PLANS = {PlanWorkflow.name: PlanWorkflow}


def live(name: str, gpu: str) -> InstanceSpec:
    # a live engine: the core releases by max_inflight, without capacity reports
    return InstanceSpec(name, gpu, MODEL, 8, max_inflight=1, backend="openai")


def one_call_query(qid: int, arrival: float, deadline: float | None, prompt: int = 2000) -> Query:
    plan = QueryPlan("wf", ((CallStep("s", (Segment(qid, prompt),), 50),),))
    return Query(qid, arrival, "wf", WorkflowRef(PlanWorkflow.name, (plan,)), deadline)


def sends(commands):
    return [c for c in commands if isinstance(c, SendCall)]


@pytest.mark.parametrize(("queue", "second"), [("urgency", 3), ("fcfs", 2)])
def test_release_order_when_a_slot_frees(queue, second):
    core = SchedulerCore([live("m", "A100-80G")], HexgenWB(), queue_factory(queue), instance_profile,
                         workflows=PLANS)
    first = sends(core.handle(QueryArrived(0.0, one_call_query(1, 0.0, 1000.0))))
    assert [s.call.query_id for s in first] == [1]
    assert not sends(core.handle(QueryArrived(1.0, one_call_query(2, 1.0, 600.0))))  # loose deadline
    assert not sends(core.handle(QueryArrived(2.0, one_call_query(3, 2.0, 22.0))))  # tight deadline
    out = core.handle(CallFinished(5.0, first[0].call.id, "m", output_tokens=50))
    assert [c.query_id for c in out if isinstance(c, QueryDone)] == [1]
    assert [s.call.query_id for s in sends(out)] == [second]


def test_queued_work_leaves_t_queue_when_calls_finish():
    core = SchedulerCore([live("fast", "A100-80G"), live("slow", "A6000")], HexgenWB(alpha=0.0),
                         queue_factory("urgency"), instance_profile, workflows=PLANS)
    def status(name: str) -> InstanceStatus:
        return next(s for s in core.instance_status() if s.name == name)

    out = core.handle(QueryArrived(0.0, one_call_query(1, 0.0, 100.0)))
    (s1,) = sends(out)
    assert s1.instance == "fast"  # both idle: the faster one
    cost = instance_profile(live("fast", "A100-80G")).cost
    assert status("fast").outstanding_s == pytest.approx(cost.call_time(2000, s1.call.predicted_output))
    (s2,) = sends(core.handle(QueryArrived(0.5, one_call_query(2, 0.5, 100.0))))
    assert s2.instance == "slow"  # α = 0: the idle instance beats the busy one
    core.handle(CallFinished(3.0, s1.call.id, "fast", output_tokens=50))
    assert status("fast").outstanding_s < 1e-9 and not status("fast").running and status("slow").outstanding_s > 0
    (s3,) = sends(core.handle(QueryArrived(4.0, one_call_query(3, 4.0, 100.0))))
    assert s3.instance == "fast"  # its work left when it finished
