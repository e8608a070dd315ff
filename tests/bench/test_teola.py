"""`flowserve bench teola`: the paper's baseline on a hand-computed graph, and the report of
each app against three baselines and the critical-path bound."""

from __future__ import annotations

import pytest
from fork_app import CLUSTER, two_at_once

from flowserve.bench.teola import paper_baseline, run_teola_bench
from flowserve.config import load_cluster
from flowserve.sim.run import PolicySpec, simulate


def test_the_paper_baseline_serves_one_request_at_a_time_without_prefix_caching():
    paper = paper_baseline(load_cluster("teola"))
    assert all(not s.engine.prefix_caching for s in paper if s.kind == "llm")
    assert all(s.op_profile.max_ops == 1 and s.op_profile.concurrency == 1 for s in paper if s.kind != "llm")
    # no fusion: the two queries' a and b run one by one (0.2, 0.4, 0.2, 0.4 s), then c per query
    res = simulate(paper_baseline(CLUSTER), two_at_once(), PolicySpec(passes="none"), standalone=[1.0, 1.0])
    assert sorted(q.latency for q in res.queries) == [pytest.approx(0.66), pytest.approx(1.26)]


def test_bench_teola_reports_each_app_against_three_baselines_and_the_bound(tmp_path):
    lines: list[str] = []
    report = run_teola_bench(tmp_path, ["naive_rag"], 6, 0.2, 0, lines.append)
    app = report["apps"]["naive_rag"]
    run = app["rates"]["0.2"]
    arms = run["arms"]
    assert set(arms) == {"paper baseline", "strong chain", "e-graph"}
    assert app["bound"]["mean_s"] <= app["alone"]["mean_s"] <= arms["e-graph"]["mean_s"] * 1.001
    # tree-summarize drafts in parallel once `prune` drops the module order
    assert run["ratios"]["vs_strong_chain"] > 1.3 and run["ratios"]["vs_paper"] >= run["ratios"]["vs_strong_chain"]
    assert run["ablation"]["e-graph − prune"]["mean_s"] > 1.3 * arms["e-graph"]["mean_s"]
    assert (tmp_path / "teola.json").exists() and any("bound (unlimited instances)" in s for s in lines)
