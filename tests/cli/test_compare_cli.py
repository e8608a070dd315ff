"""`flowserve bench compare` on tiny sizes: side-by-side figures, JSON, clear errors."""

import json

from typer.testing import CliRunner

from flowserve.cli import app

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
