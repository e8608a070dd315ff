"""The policy table's order, winner mark and legend."""

from __future__ import annotations

from typing import Any

from flowserve.metrics.tables import POLICY_TABLE_LEGEND, policy_table, rank_policies


def summary(m95: float | None, m99: float | None, mean: float) -> dict[str, Any]:
    return {"min_slo_scale": {"0.95": m95, "0.99": m99}, "throughput_qps": 1.0,
            "latency_s": {"mean": mean, "p99": 2 * mean}, "token_hit_rate": 0.5, "failed": 0}


def test_ranking_is_lowest_scale_first_then_99_then_mean_and_unreached_last() -> None:
    s = {"never": summary(None, None, 1.0), "b": summary(2.0, 3.0, 9.0), "a": summary(2.0, 2.5, 50.0),
         "c": summary(1.5, None, 80.0), "d": summary(2.0, 3.0, 5.0)}
    assert rank_policies(s) == ["c", "a", "d", "b", "never"]


def test_table_keeps_the_order_given_and_marks_the_best() -> None:
    s = {"x": summary(1.5, 2.0, 10.0), "base": summary(3.0, 4.0, 20.0)}
    rows = policy_table(s, "base", best="x").splitlines()[2:]
    assert rows[0].startswith("| x ★ | 1.50 | 2.00 |")
    assert rows[0].endswith("| 2.00 | 2.00 | 1.00 |")  # 3.0 / 1.5, 4.0 / 2.0, equal throughput
    assert rows[1].startswith("| base | 3.00 |")


def test_the_legend_says_which_direction_is_better_for_every_column() -> None:
    for column in ("min SLO ×", "throughput", "mean, p99", "hit rate", "failed", "gains"):
        part = POLICY_TABLE_LEGEND.split(column, 1)[1].split(";")[0]
        assert "better" in part, column
    assert "\n" not in POLICY_TABLE_LEGEND
