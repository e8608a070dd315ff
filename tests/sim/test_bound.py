"""The critical-path bound (flowserve.sim.bound) on a small hand-computed graph, and
`flowserve bench teola`'s three baselines beside it."""

from __future__ import annotations

import pytest

from flowserve.bench.teola import paper_baseline, run_teola_bench
from flowserve.config import load_cluster
from flowserve.graph.workflow import Graph, Workflow
from flowserve.profiles.ops import OpProfile
from flowserve.sim.bound import critical_path_latencies, unlimited
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import AppQuery, QuerySpec, Workload

CLUSTER = (InstanceSpec("llm", "A100-80G", "llama-3.1-8b"),
           InstanceSpec("emb", "", "embedding", kind="embedding", op_profile=OpProfile(0.1, 0.01)),
           InstanceSpec("vec", "", "vector_db", kind="vector_db", op_profile=OpProfile(0.05, 0.01)))


class Fork(Workflow):
    """a (10 units) and b (30 units) on the embedder, then c (1 unit) reads both."""

    name = "fork"

    def start(self, g: Graph) -> None:
        a = g.tool("a", "embed", batchable=True, units=10)
        b = g.tool("b", "embed", batchable=True, units=30)
        g.tool("c", "vector_search", batchable=True, x=a, y=b)


def two_at_once() -> Workload:
    return Workload("fork", tuple(QuerySpec(i, 0.0, AppQuery("fork", Fork)) for i in range(2)))


def test_the_bound_is_the_longest_path_and_alone_is_the_one_instance_schedule():
    policy = PolicySpec(passes="none")
    # unlimited: a (0.1 + 0.1) and b (0.1 + 0.3) at once, then c (0.05 + 0.01): 0.46 s
    assert critical_path_latencies(CLUSTER, two_at_once(), policy) == [pytest.approx(0.46)] * 2
    # alone on the cluster: a and b share one embedder batch (0.1 + 0.4), then c: 0.56 s
    assert critical_path_latencies(CLUSTER, two_at_once(), policy, copies=1) == [pytest.approx(0.56)] * 2
    # both queries at once: the second's a and b wait for the first's batch (0.5 + 0.5 + 0.06)
    res = simulate(CLUSTER, two_at_once(), policy, standalone=[1.0, 1.0])
    assert [q.latency for q in res.queries] == [pytest.approx(0.56), pytest.approx(1.06)]
    wide = unlimited(CLUSTER, 3)
    assert [s.name for s in wide if s.kind == "llm"] == ["llm~0", "llm~1", "llm~2"]
    assert [s.op_profile.concurrency for s in wide if s.kind != "llm"] == [3, 3]


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
