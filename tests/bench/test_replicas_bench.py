"""`flowserve bench replicas`' pieces: its workload is one seeded set of queries, its figures
come out of what the client saw, and a program summary that misses a call is caught."""

from __future__ import annotations

import itertools

from flowserve.bench.replicas import cost_share, measure
from flowserve.bench.replicas_client import ClientCall, ClientRun, ProgramCheck
from flowserve.bench.replicas_workload import PROGRAM, replicas_workload


def test_the_workload_is_seeded_and_mixes_tools_programs_and_tenants() -> None:
    a, b = replicas_workload(200, 10.0, seed=3), replicas_workload(200, 10.0, seed=3)
    assert a == b
    kinds = {q.plan.workflow for q in a.queries}
    assert kinds == {"tool_use", PROGRAM} and {q.tenant for q in a.queries} == {"gold", "free"}
    program = next(q.plan for q in a.queries if q.plan.workflow == PROGRAM)
    prompts = [step[0].prompt for step in program.steps]
    assert all(p[: len(q)] == q for q, p in itertools.pairwise(prompts))  # each call extends the last


def test_figures_from_what_the_client_saw() -> None:
    calls = [ClientCall(1, "gold", 0, 0.0, 1.0, 200, 100, 60, 10), ClientCall(2, "free", 1, 0.0, 2.0, 200, 100, 0, 10),
             ClientCall(3, "free", 1, 0.5, 3.0, 0), ClientCall(4, "gold", 0, 1.0, 4.0, 503)]
    run = ClientRun(calls, [ProgramCheck("p1", 2, 1, 1, 100, 60, 10, {"calls": 2, "prompt_tokens": 100,
                                                                       "cached_tokens": 60, "output_tokens": 10,
                                                                       "lost_calls": 1})])
    m = measure(run, time_scale=2.0)
    assert m["token_hit_rate"] == 0.3 and m["mean_latency_s"] == 3.0 and m["server_errors"] == 1
    assert m["cut_in_flight"] == 1 and m["programs_exact"] == 1
    assert cost_share(calls[:2]) == {"free": 120 / 180, "gold": 60 / 180}  # uncached prompt + 2 × output
    short = ProgramCheck("p2", 3, 3, 0, 10, 0, 3, {"calls": 2, "prompt_tokens": 10, "cached_tokens": 0,
                                                   "output_tokens": 3})
    assert short.mismatches() == ["p2: calls 2 (lost 0) for 3 sent, 0 cut"]
    cut_before = ProgramCheck("p3", 2, 1, 1, 10, 0, 3, {"calls": 1, "prompt_tokens": 10, "cached_tokens": 0,
                                                        "output_tokens": 3, "lost_calls": 0})
    assert cut_before.mismatches() == []  # cut before its replica took it: never started, never counted
