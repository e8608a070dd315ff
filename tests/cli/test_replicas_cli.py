"""`simulate --replicas` and `bench replicas` from the command line: a run, and bad input
refused in one line (exit 2) before anything runs."""

import json

import pytest
from typer.testing import CliRunner

from flowserve.cli import app

runner = CliRunner()


def test_simulate_with_replicas_names_them(tmp_path):
    out = tmp_path / "sim.json"
    r = runner.invoke(app, ["simulate", "--workload", "tool_use", "--set", "workload.queries=60", "--dispatch",
                            "preble_e2", "--replicas", "3", "--sync-ms", "50", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "×3 replicas, sync 50 ms" in r.output
    assert json.loads(out.read_text())["policy"]["replicas"] == 3


@pytest.mark.parametrize(("args", "message"), [
    (["simulate", "--replicas", "0"], "replicas: expected 1 to 64"),
    (["simulate", "--replicas", "2", "--sync-ms", "-1"], "sync_ms"),
    (["bench", "replicas", "--parts", "sim,nope"], "no part ['nope']"),
])
def test_bad_replica_options_are_one_line(tmp_path, args, message):
    r = runner.invoke(app, [*args, *(["--out", str(tmp_path / "b")] if args[0] == "bench" else [])])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "b" / "replicas.json").exists()
