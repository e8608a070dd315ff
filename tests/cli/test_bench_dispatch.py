"""`flowserve bench explain` and `bench kv-events`: bad input exits 2 with the reason."""

from __future__ import annotations

from typer.testing import CliRunner

from flowserve.cli import app

runner = CliRunner()


def test_explain_wants_two_contestants_and_a_known_workload() -> None:
    res = runner.invoke(app, ["bench", "explain", "--policy", "flowserve"])
    assert res.exit_code == 2 and "exactly two" in res.output
    res = runner.invoke(app, ["bench", "explain", "--workload", "nope", "--policy", "llmd", "--policy", "flowserve"])
    assert res.exit_code == 2 and "unknown 'nope'" in res.output
    res = runner.invoke(app, ["bench", "explain", "--policy", "llmd", "--policy", "./missing.yaml"])
    assert res.exit_code == 2 and "missing.yaml" in res.output


def test_a_bad_profile_file_exits_2_naming_the_field(tmp_path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("scorers:\n  - {name: prefix_hit, weight: two}\n")
    res = runner.invoke(app, ["simulate", "--workload", "text2sql", "--dispatch", str(bad), "--queue", "fcfs"])
    assert res.exit_code == 2
    assert "scorers[0]: weight must be a finite number ≥ 0, got 'two'" in " ".join(res.output.split())
