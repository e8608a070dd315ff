"""`flowserve tune`: bad input exits 2 with one line naming the problem; a run writes a profile
that `simulate` and `serve` load; `tune alpha` is still there."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.policies.registry import make_dispatch
from flowserve.policies.scoring.profile import load_profile

runner = CliRunner()
SMALL = ["--workload", "tool_use", "--queries", "24", "--cluster", "preble-a6000", "--jobs", "1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--budget", "2", "--out", "p.yaml"], "give the queries to tune on: --trace FILE"),
    (["--trace", "t.jsonl", "--workload", "tool_use", "--out", "p.yaml"], "not both"),
    ([*SMALL, "--budget", "2"], "--out: where to write the tuned profile"),
    ([*SMALL, "--budget", "0", "--out", "p.yaml"], "--budget: expected 1 to 10,000 simulations, got 0"),
    ([*SMALL, "--metric", "p50", "--out", "p.yaml"], "--metric: expected one of mean, p90, p99, got 'p50'"),
    ([*SMALL, "--scorer", "prefix_hits", "--out", "p.yaml"], "--scorer: unknown scorer 'prefix_hits'"),
    ([*SMALL, "--knob", "finish.w", "--out", "p.yaml"], "--knob: the profile has no knob 'finish.w'"),
    ([*SMALL, "--profile", "nope", "--out", "p.yaml"], "nope"),
    (["--trace", "bad.jsonl", "--out", "p.yaml"], "line 1 is not a JSON object"),
    (["--trace", "missing.jsonl", "--out", "p.yaml"], "cannot read trace 'missing.jsonl'"),
])
def test_bad_input_exits_2_naming_the_problem(tmp_path: Path, monkeypatch, args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.jsonl").write_text("[1, 2, 3]\n")
    result = runner.invoke(app, ["tune", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "p.yaml").exists()


def test_a_run_writes_a_profile_simulate_and_serve_load(tmp_path: Path) -> None:
    out = tmp_path / "tuned.yaml"
    result = runner.invoke(app, ["tune", *SMALL, "--budget", "2", "--seed", "43", "--out", str(out),
                                 "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "held-out mean s" in result.output and f"profile: {out}" in result.output
    assert out.read_text().startswith("# flowserve tune on workload tool_use (seed 43), cluster preble-a6000")
    spec = load_profile(str(out))
    assert {p.name for p in spec.scorers} >= {"finish", "uncached_work"}
    assert make_dispatch(str(out)).name == spec.name
    assert (tmp_path / "r.json").exists()


def test_tune_alpha_is_still_a_subcommand() -> None:
    result = runner.invoke(app, ["tune", "alpha", "--help"])
    assert result.exit_code == 0 and "hexgen_wb" in result.output
