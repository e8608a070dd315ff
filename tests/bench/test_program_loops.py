"""The agent-loop part of `bench programs`: the clairvoyant program-SRPT bound by hand, and
a small run of the loops."""

from __future__ import annotations

import pytest

from flowserve.bench.program_bound import plan_calls, remaining_work
from flowserve.bench.program_loops import (
    BOUND,
    FCFS,
    LOOP_CONTESTANTS,
    NEAR,
    NO_HEADERS,
    gap_closed,
    loop_goals,
    loop_traces,
    run_mode,
)
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


def test_loop_goals_on_made_up_rows() -> None:
    def row(mean: float, fcfs: float, bound: float) -> dict:
        return {"mean_s": mean, "gain_vs_fcfs": fcfs / mean, "gap_closed": gap_closed(fcfs, mean, bound)}

    loops = {"burst": {"rows": {FCFS: row(100, 100, 50), "flowserve": row(70, 100, 50), BOUND: row(50, 100, 50)},
                       "bound_gain": 2.0},
             "stream": {"rows": {FCFS: row(40, 40, 39), "flowserve": row(40.2, 40, 39), BOUND: row(39, 40, 39)},
                        "bound_gain": 40 / 39}}
    live = {mode: {"contestants": {"flowserve": {"mean_s": 60.0}, NO_HEADERS: {"mean_s": 66.0}},
                   "ratio": 1.5, "sim_ratio": 1.2} for mode in ("burst", "stream")}
    got = {g["goal"].split(" (")[0]: (g["value"], g["met"]) for g in loop_goals(loops, live)}
    assert got["burst: flowserve closes ≥ 50% of the gap to the clairvoyant bound"] == ("60%", True)
    assert got["burst: flowserve ≥ 1.3× per-call FCFS where the bound allows ≥ 1.6×, simulated"] == (1.429, True)
    assert got["stream: flowserve with headers ≥ per-call FCFS"][1] is False  # 40.2 s against 40 s
    assert "stream: flowserve ≥ 1.3× per-call FCFS where the bound allows ≥ 1.6×, simulated" not in got
    assert got["burst: with headers never worse than without, live"] == (1.1, True)
    assert got["burst: the simulator predicts the live ratio within 25%"] == ("20.0%", True)  # |1.2 / 1.5 − 1|


def test_the_bound_is_below_every_contestant_on_small_agent_loops() -> None:
    burst = run_mode(loop_traces("burst", 3, 1.0, n=12), list(LOOP_CONTESTANTS))
    stream = run_mode(loop_traces("stream", 3, NEAR * burst["slot_rate"], n=12), list(LOOP_CONTESTANTS))
    for run in (burst, stream):
        bound = run["rows"][BOUND]["mean_s"]
        assert set(run["rows"]) == set(LOOP_CONTESTANTS)
        assert all(bound <= row["mean_s"] for row in run["rows"].values())
    # the burst leaves an order to gain (40.1 s per-call FCFS, 34.4 s the bound)
    assert burst["bound_gain"] > 1.1
