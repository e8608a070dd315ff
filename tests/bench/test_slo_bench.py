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
