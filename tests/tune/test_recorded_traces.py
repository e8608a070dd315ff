"""A trace the gateway recorded (agent-trace lines) feeds the α tuner and `bench compare`
as a simulation's own trace does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.sim.compare import run_compare_bench
from flowserve.tune.alpha import tune_trace
from flowserve.workloads.program_trace import query_json
from flowserve.workloads.programs import ProgramShape, program_traces


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    shape = ProgramShape(system_tokens=300, user_tokens=100, tool_result_tokens=100, output_tokens=30)
    path = tmp_path / "trace-recorded.jsonl"
    path.write_text("".join(json.dumps(query_json(q, {"id": i})) + "\n"
                            for i, q in enumerate(program_traces(6, 1.0, 3, shape))))
    return path


def test_the_alpha_tuner_sweeps_a_recorded_trace(recorded: Path) -> None:
    result, _ = tune_trace(load_cluster("hetero-1"), str(recorded), slo_scale=4.0)
    assert result.queries == 6 and len(result.mean_latency) >= 6 and result.alpha in result.mean_latency
    with pytest.raises(ConfigError, match="not UTF-8"):
        bad = recorded.with_name("bad.jsonl")
        bad.write_bytes(b"\xff\xfe")
        tune_trace(load_cluster("hetero-1"), str(bad))


def test_bench_compare_takes_a_recorded_trace(recorded: Path, tmp_path: Path) -> None:
    data = run_compare_bench(tmp_path / "out", True, Console(quiet=True), [str(recorded)],
                             None, oracle=False, queries=4, classes_check_on=False, cluster="preble-a6000")
    [case] = data["cases"]
    assert case["queries"] == 4 and case["cluster"] == "preble-a6000"
    assert {"round_robin", "flowserve"} <= set(case["results"]) and case["gain_0.95"] is not None


def test_flowserve_simulate_replays_a_recorded_trace(recorded: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flowserve.cli import app

    out = tmp_path / "run.json"
    res = CliRunner().invoke(app, ["simulate", "--cluster", "preble-a6000", "--workload", str(recorded),
                                   "--dispatch", "flowserve", "--queue", "flowserve", "--json", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())
    assert summary["queries"] == summary["completed"] == 6


def test_flowserve_tune_tunes_on_a_recorded_trace(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flowserve.cli import app
    from flowserve.policies.scoring.profile import load_profile

    shape = ProgramShape(system_tokens=300, user_tokens=100, tool_result_tokens=100, output_tokens=30)
    trace = tmp_path / "trace-recorded.jsonl"
    trace.write_text("".join(json.dumps(query_json(q, {"id": i})) + "\n"
                             for i, q in enumerate(program_traces(8, 1.0, 43, shape))))
    out = tmp_path / "tuned.yaml"
    res = CliRunner().invoke(app, ["tune", "--trace", str(trace), "--cluster", "preble-a6000", "--budget", "2",
                                   "--jobs", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "2 queries to search on, 2 to validate on, 4 held out" in " ".join(res.output.split())
    assert load_profile(str(out)).scorers
