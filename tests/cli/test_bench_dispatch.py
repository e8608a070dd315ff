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
