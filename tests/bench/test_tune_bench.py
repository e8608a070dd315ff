"""`bench tune`: the goal per case by hand, a small run's rows, and an unknown workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowserve.bench.tune_bench import goal_met, run_tune_bench, table
from flowserve.errors import ConfigError


def test_goal_by_hand() -> None:
    assert goal_met(0.995, default_is_best=True)  # within 1% of a default that is already best
    assert not goal_met(0.985, default_is_best=True)
    assert goal_met(1.05, default_is_best=False)
    assert not goal_met(1.04, default_is_best=False)  # behind a peer, tuning must gain 5%


def test_a_small_run(tmp_path: Path) -> None:
    data = run_tune_bench(tmp_path, ["tool_use"], [43], 2, 2, 1, "mean", [], lambda _: None)
    [row] = data["cases"]
    assert row["workload"] == "tool_use" and row["seed"] == 43 and row["cluster"] == "preble-a6000"
    assert row["default_is_best"] == (row["default_test"] <= min(row["peers_test"].values()))
    assert row["goal_met"] == goal_met(row["gain"], row["default_is_best"])
    assert "flowserve" not in row["peers_test"] and len(row["peers_test"]) >= 8
    assert (tmp_path / "bench-tune.json").exists()
    assert table(data["cases"]).splitlines()[2].startswith("| tool_use | 43 |")


def test_an_unknown_workload_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--workload: unknown 'tools'; known: text2sql"):
        run_tune_bench(tmp_path, ["tools"], [43], 2, 2, 1, "mean", [], lambda _: None)
