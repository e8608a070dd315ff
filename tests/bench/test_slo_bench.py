"""`bench slo` on a few requests: every contestant meets the same requests, the shares and
ratios are reported and written."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from flowserve.bench.slo import FLOWSERVE, LLMD, WITHOUT, run_slo_bench


def test_the_contestants_meet_the_same_requests_and_the_report_is_written(tmp_path: Path) -> None:
    report = run_slo_bench(tmp_path, True, Console(quiet=True), seeds=(5,), contestants=(FLOWSERVE, WITHOUT, LLMD),
                           queries=120)
    rows = report["rows"]
    assert [r["contestant"] for r in rows] == [FLOWSERVE, WITHOUT, LLMD]
    assert {r["requests"] for r in rows} == {120}
    assert all(0.0 <= r["share_met"] <= 1.0 for r in rows)
    assert rows[1]["shed_share"] == 0.0  # without the predictor nothing is shed
    assert set(report["ratios"]) == {LLMD, WITHOUT}
    written = json.loads((tmp_path / "slo.json").read_text())
    assert written["summary"][FLOWSERVE]["mean"] == rows[0]["share_met"]


def test_the_predictor_bench_scores_every_candidate_on_the_same_calls(tmp_path: Path) -> None:
    from flowserve.bench.predictor import run_predictor_bench

    report = run_predictor_bench(tmp_path, True, Console(quiet=True), seed=6)
    rows = {r["model"]: r for r in report["rows"]}
    assert set(rows) == {"analytic", "sgd", "river", "lightgbm"}
    assert report["scored"] > 100 and report["calls"] >= report["scored"]
    assert rows["analytic"]["learn_us"] == 0.0 and rows["sgd"]["learn_us"] > 0.0
    assert all(r["ttft_mae_ms"] >= 0 and r["tpot_mae_ms"] >= 0 for r in rows.values())
    assert json.loads((tmp_path / "predictor.json").read_text())["rows"] == report["rows"]
