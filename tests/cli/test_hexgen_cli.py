"""`flowserve tune alpha` and a smoke run of `flowserve bench hexgen --quick`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.workloads import load_workload
from flowserve.workloads.trace import write_trace

runner = CliRunner()


def _trace(tmp_path):
    wl = load_workload("text2sql-mixed", {"queries": 10, "rate": 1.0, "seed": 7})
    path = tmp_path / "t.jsonl"
    write_trace(path, wl.queries)
    return path


def test_tune_alpha_sweeps_a_recorded_trace(tmp_path):
    out = tmp_path / "tune.json"
    res = runner.invoke(app, ["tune", "alpha", "--trace", str(_trace(tmp_path)), "--cluster", "hetero-2",
                              "--slo-scale", "4", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    lat = {float(a): v for a, v in data["mean_latency"].items()}
    assert {0.0, 0.2, 0.4, 0.6, 0.8, 1.0} <= set(lat)
    assert data["alpha"] == min(lat, key=lambda a: (lat[a], a))
    assert f"best α = {data['alpha']:.1f}" in res.output


def test_tune_alpha_rejects_bad_input_with_one_line(tmp_path):
    cases = [
        (["--trace", str(tmp_path / "missing.jsonl")], "cannot read trace"),
        (["--trace", str(_trace(tmp_path)), "--queue", "lifo"], "unknown queue policy 'lifo'"),
        (["--trace", str(_trace(tmp_path)), "--slo-scale", "-1"], "--slo-scale must be positive"),
        (["--trace", str(_trace(tmp_path)), "--cluster", "nowhere"], "neither a file nor a built-in cluster"),
    ]
    for args, message in cases:
        res = runner.invoke(app, ["tune", "alpha", *args])
        assert res.exit_code == 2, res.output
        assert message in res.output


def test_bench_hexgen_quick_smoke(tmp_path):
    res = runner.invoke(app, ["bench", "hexgen", "--quick", "--queries", "8", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "bench-hexgen.json").read_text())
    assert {s["engine"] for s in data["settings"]} == {"default", "vllm-0.6"}
    for s in data["settings"]:
        assert list(s["results"]) == ["RR+FCFS", "RR+PQ", "WB+FCFS", "WB+PQ", "WB+PQ+online-α"]
        assert s["ratios"]["RR+FCFS"] == {"95": 1.0, "99": 1.0, "throughput": 1.0}
        for r in s["results"].values():
            assert r["failed"] == 0 and r["slo_attainment"]
    assert data["tuning"][0]["simulations"] >= 6 and data["dispatch_terms"]["default"]
    md = (tmp_path / "bench-hexgen.md").read_text()
    assert "Headline, default engine" in md and "paper Table 1" in md
    assert (tmp_path / "alpha-sensitivity.png").stat().st_size > 0
    assert (tmp_path / "attainment-vllm-0.6-hetero-1.png").stat().st_size > 0
