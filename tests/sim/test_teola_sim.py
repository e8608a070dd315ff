"""Teola's apps in the simulator: passes, op engines, decode pipelining, failures."""

from __future__ import annotations

import statistics

import pytest

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload

TEOLA = load_cluster("teola")


def run(kind: str, passes: str, queue: str = "fcfs", **over):
    wl = load_workload(kind, {"queries": 12, "rate": 0.5, **over})
    return simulate(TEOLA, wl, PolicySpec("prefix_affinity", queue, passes=passes), standalone=[1.0] * 12)


@pytest.mark.parametrize("kind", ["naive_rag", "advanced_rag"])
def test_rag_apps_run_and_passes_lower_latency(kind):
    base, opt = run(kind, "none"), run(kind, "all", "topology")
    assert not [q.failed for q in base.queries + opt.queries if q.failed]
    assert len(opt.queries) == 12
    assert statistics.fmean(q.latency for q in opt.queries) < statistics.fmean(q.latency for q in base.queries)
    assert not any(c.stage.endswith(".prefill") for c in base.calls)
    pre = [c for c in opt.calls if c.stage.endswith(".prefill")]
    assert pre and all(c.output_tokens == 1 for c in pre)  # prefill-only iterations
    assert {c.instance.split("-")[0] for c in opt.calls} == {"llm"}  # the core model only (Llama-2-13B)


def test_search_gen_overlaps_the_judge_and_answer_prefills_with_the_draft():
    """Search-augmented generation is a chain (draft → judge → search → answer): what
    the graph allows is prefilling the judge's and the answer's instruction and question
    while the draft decodes, on the instances that then run those calls."""
    opt = run("search_gen", "all", "topology")
    assert not [q for q in opt.queries if q.failed]
    reused = 0
    for qid in range(12):
        calls = {c.stage: c for c in opt.calls if c.query_id == qid}
        assert calls["draft"].instance.startswith("judge") and calls["answer"].instance.startswith("llm")
        for step in ("judge", "answer"):
            pre, full = calls[f"{step}.prefill"], calls[step]
            assert pre.finished < calls["draft"].finished  # overlapped with the draft's decode
            if full.instance == pre.instance:  # (the dispatch's load guard may send it elsewhere)
                assert full.cached_tokens >= pre.input_tokens
                reused += 1
    assert reused >= 12


def test_pipelining_helps_when_each_part_has_its_own_slow_work():
    # searches one at a time (a search service without concurrency): started part by
    # part during the expansion, they finish sooner than all started at its end
    import dataclasses

    from flowserve.profiles.ops import op_profile
    slow = tuple(dataclasses.replace(s, op_profile=op_profile("search", {"concurrency": 1, "max_units": 1}))
                 if s.kind == "search" else s for s in TEOLA)
    wl = load_workload("search_gen", {"queries": 1, "rate": 1.0, "n_queries": 3})
    res = simulate(slow, wl, PolicySpec("round_robin", "fcfs", passes="prune,pipeline"))
    plain = simulate(slow, wl, PolicySpec("round_robin", "fcfs", passes="prune"))
    assert res.queries[0].latency < plain.queries[0].latency - 0.1


def test_an_expansion_with_fewer_parts_shrinks_the_fan_out_in_the_simulator():
    """The oracle's expansion ends after two queries (marks) where three were planned, and
    the rerank keeps one chunk: the query runs two retrievals and one refine, and ends."""
    import dataclasses

    from flowserve.graph.oracle import TableOracle, ToolOutcome
    from flowserve.graph.prompt import Segment

    wl = load_workload("advanced_rag", {"queries": 1, "rate": 1.0})
    q = wl.queries[0]
    o = q.plan.oracle
    oracle = TableOracle({**o.outputs, "expand": 40}, {**o.tools, "rerank": ToolOutcome(0.0, value=(Segment(9, 256),))},
                         {"expand": (20, 40)})
    short = dataclasses.replace(wl, queries=(dataclasses.replace(q, plan=dataclasses.replace(q.plan, oracle=oracle)),))
    for passes in ("none", "all"):
        res = simulate(TEOLA, short, PolicySpec("prefix_affinity", "topology", passes=passes), standalone=[1.0])
        assert not res.queries[0].failed
        assert sorted(c.stage for c in res.calls if not c.stage.endswith(".prefill")) == ["expand", "refine0"]


def test_failing_search_service_fails_queries_with_the_reason():
    res = run("search_gen", "all", search_error=1.0)
    assert all(q.failed and "search service error: HTTP 503" in q.failed for q in res.queries)


def test_unknown_pass_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown graph pass"):
        run("naive_rag", "prune,fuse")
