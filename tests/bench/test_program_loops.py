"""The agent-loop part of `bench programs`: the clairvoyant program-SRPT bound by hand, and
a small run of the loops."""

from __future__ import annotations

import pytest

from flowserve.bench.program_bound import plan_calls, remaining_work
from flowserve.bench.program_loops import BOUND, FCFS, gap_closed, loop_traces, run_mode
from flowserve.graph.plan import Segment
from flowserve.profiles.cost_model import cost_model_for
from flowserve.workloads.base import SegmentIds
from flowserve.workloads.program_trace import TracedCall, TracedQuery, shaped_plan

COST = cost_model_for("A6000", "llama-3.1-8b")


def test_the_bound_counts_each_calls_new_context_and_its_decode() -> None:
    calls = (TracedCall("plan", 1000, 50, prompt=(Segment(1, 1000),)),
             TracedCall("act", 1600, 80, gap_s=1.0, prompt=(Segment(1, 1000), Segment(2, 600))))
    plan = shaped_plan(TracedQuery(calls), "program", {}, SegmentIds())
    # the second call follows the first through its tool gap: the first's 1000 tokens are its context
    assert plan_calls(plan) == [("c0", 1000, 50, 0), ("c1", 1600, 80, 1000)]
    both = COST.call_time(1000, 50) + COST.call_time(1600, 80, 1000)
    assert remaining_work(plan_calls(plan), {}, COST) == pytest.approx(both)
    assert remaining_work(plan_calls(plan), {"c0": None}, COST) == pytest.approx(COST.call_time(1600, 80, 1000))


def test_gap_closed_by_hand() -> None:
    assert gap_closed(10.0, 8.0, 6.0) == pytest.approx(0.5)  # (10 − 8) / (10 − 6)
    assert gap_closed(10.0, 10.0, 10.0) is None  # the bound gains nothing


def test_a_small_burst_of_loops_the_bound_beats_fcfs() -> None:
    run = run_mode(loop_traces("burst", 3, 1.0, n=8), [FCFS, BOUND])
    fcfs, bound = run["rows"][FCFS], run["rows"][BOUND]
    assert bound["mean_s"] < fcfs["mean_s"] and run["bound_gain"] == fcfs["mean_s"] / bound["mean_s"]
    assert fcfs["gap_closed"] == 0.0 and bound["gap_closed"] == pytest.approx(1.0)
    assert all(q.deadline_s == run["deadline_s"] for q in run["workload"])  # one shared deadline
