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
    return simulate(TEOLA, wl, PolicySpec("round_robin", queue, passes=passes))


@pytest.mark.parametrize("kind", ["search_gen", "naive_rag", "advanced_rag"])
def test_apps_run_and_passes_lower_latency(kind):
    base, opt = run(kind, "none"), run(kind, "all", "topology")
    assert not [q.failed for q in base.queries + opt.queries if q.failed]
    assert len(opt.queries) == 12
    assert statistics.fmean(q.latency for q in opt.queries) < statistics.fmean(q.latency for q in base.queries)
    stages = {c.stage for c in opt.calls}
    if kind != "search_gen":
        assert not any(s.endswith(".prefill") for s in {c.stage for c in base.calls})
    assert any(s.endswith(".prefill") for s in stages)
    pre = [c for c in opt.calls if c.stage.endswith(".prefill")]
    assert all(c.output_tokens == 1 for c in pre)  # prefill-only iterations


def test_pipelining_helps_when_each_part_has_its_own_slow_work():
    # searches one at a time (a search service without concurrency): started part by
    # part during the expansion, they finish sooner than all started at its end
    import dataclasses

    from flowserve.profiles.ops import op_profile
    slow = tuple(dataclasses.replace(s, op_profile=op_profile("search", {"concurrency": 1, "max_units": 1}))
                 if s.kind == "search" else s for s in TEOLA)
    wl = load_workload("search_gen", {"queries": 1, "rate": 1.0})
    res = simulate(slow, wl, PolicySpec("round_robin", "fcfs", passes="prune,pipeline"))
    plain = simulate(slow, wl, PolicySpec("round_robin", "fcfs", passes="prune"))
    assert res.queries[0].latency < plain.queries[0].latency - 0.1


def test_failing_search_service_fails_queries_with_the_reason():
    res = run("search_gen", "all", search_error=1.0)
    assert all(q.failed and "search service error: HTTP 503" in q.failed for q in res.queries)


def test_unknown_pass_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown graph pass"):
        run("naive_rag", "prune,fuse")


def test_graph_show_cli_prints_both_graphs_and_draws(tmp_path):
    from typer.testing import CliRunner

    from flowserve.cli import app

    png = tmp_path / "g.png"
    res = CliRunner().invoke(app, ["graph", "show", "naive_rag", "--passes", "all", "--png", str(png)])
    assert res.exit_code == 0, res.output
    assert "embed_docs#0" in res.output and "answer.prefill" in res.output and png.stat().st_size > 1000
    bad = CliRunner().invoke(app, ["graph", "show", "nope"])
    assert bad.exit_code == 2 and "unknown app 'nope'" in bad.output
