"""`flowserve bench compare` on tiny sizes: side-by-side figures, JSON, clear errors."""

import json
import re

import pytest
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.errors import ConfigError
from flowserve.workloads import load_workload

runner = CliRunner()


def test_bench_compare_small(tmp_path):
    r = runner.invoke(app, ["bench", "compare", "--workload", "text2sql", "--policy", "round_robin",
                            "--policy", "flowserve", "--queries", "6", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "bench-compare.json").read_text())
    (case,) = data["cases"]
    assert set(case["results"]) == {"round_robin", "flowserve", "oracle"}
    for res in case["results"].values():
        assert res["min_slo_scale"]["0.95"] is not None and res["failed"] == 0
    assert case["best_other_0.95"] == "round_robin" and case["gain_0.95"] > 0
    assert "flowserve vs best other" in r.output
    # the decision cost: per simulation, since the deadline-aware search runs several
    rr, ours = case["results"]["round_robin"], case["results"]["flowserve"]
    assert rr["sims"] == 1 and ours["sims"] > 1
    assert case["decision_cost"] == ours["wall_per_sim_s"] / rr["wall_per_sim_s"]
    assert "decision cost" in r.output


def test_decision_cost_is_per_simulation_against_the_median_other():
    from flowserve.sim.compare import decision_cost

    assert decision_cost(6.0, [1.0, 2.0, 100.0]) == 3.0
    assert decision_cost(3.0, [1.0, 2.0]) == 2.0  # the median of an even count: the mean of the middle two


def test_bench_compare_rejects_unknown_names(tmp_path):
    r = runner.invoke(app, ["bench", "compare", "--workload", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown 'nope'" in r.output
    r = runner.invoke(app, ["bench", "compare", "--policy", "magic", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown dispatch policy 'magic'" in r.output


def test_programs_are_judged_by_mean_latency(tmp_path):
    r = runner.invoke(app, ["bench", "compare", "--workload", "programs", "--policy", "round_robin",
                            "--policy", "flowserve", "--queries", "8", "--no-oracle", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    (case,) = json.loads((tmp_path / "bench-compare.json").read_text())["cases"]
    lat = {k: v["latency_mean_s"] for k, v in case["results"].items()}
    assert case["best_other_0.95"] == "round_robin"
    assert case["gain_0.95"] == lat["round_robin"] / lat["flowserve"]  # latency ratio, not an SLO scale


def test_a_folder_named_like_a_workload_shadows_no_builtin(tmp_path, monkeypatch):
    """Issue 44 item 8: `--out tool_use` makes a folder that `--workload mixed` (which holds
    tool_use) then took for a workload file; `hetero-1/` would have hidden the cluster."""
    from flowserve.config import load_cluster
    from flowserve.workloads.mixes import MIXED

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tool_use").mkdir()
    (tmp_path / "hetero-1").mkdir()
    wl = MIXED["mixed"].build(4, 0)
    assert {q.tenant for q in wl.queries} == {"gold", "free", "etl"}  # text2sql, tool_use and the batch job
    assert len(load_cluster("hetero-1")) == 4
    with pytest.raises(ConfigError, match=r"cannot read '\./tool_use'"):  # a path that looks like one is a path
        load_workload("./tool_use")


def test_empty_cells_read_dash_never_nan(tmp_path, monkeypatch):
    """Issue 44 item 9: llm_sql has no interactive query: its interactive columns are empty
    cells (`—`, null in the JSON), never `nan`."""
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["bench", "compare", "--workload", "llm_sql", "--policy", "round_robin", "--queries", "4",
                            "--no-oracle", "--out", "tool_use"])
    assert r.exit_code == 0, r.output
    assert not re.search(r"\bnan\b", r.output, re.I)
    (case,) = json.loads((tmp_path / "tool_use" / "bench-compare.json").read_text())["cases"]
    rr = case["results"]["round_robin"]
    assert rr["latency_mean_s"] is None and rr["latency_p99_s"] is None and rr["throughput_qps"] is None
    assert rr["batch_latency_mean_s"] > 0
    row = next(line for line in (tmp_path / "tool_use" / "bench-compare.md").read_text().splitlines()
               if line.startswith("| round_robin"))
    assert row.split(" | ")[3:6] == ["—", "—", "—"]  # mean s, p99 s, q/s
