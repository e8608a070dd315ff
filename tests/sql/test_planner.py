"""The planner's formulas against hand-computed examples, and its arrangements."""

from __future__ import annotations

import pytest

from flowserve.sql.dedup import dedup
from flowserve.sql.engine_model import EngineShape
from flowserve.sql.errors import SQLInputError
from flowserve.sql.estimate import token_hit_rate
from flowserve.sql.ggr import GGRConfig, functional_dependencies, ggr, ggr_value_score, near_unique_columns
from flowserve.sql.options import ALL, parse_optimize
from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import LLMOp, plan_op
from flowserve.sql.reorder import column_score, fixed_order, sort_rows
from flowserve.sql.templates import layout, parse_template


def test_column_score_hand_computed() -> None:
    # ASL 300 chars, 1000 rows, 50 distinct → 300·1000/50 = 6000; a unique 90-char column → 90
    assert column_score(300, 1000, 50) == 6000
    assert column_score(90, 1000, 1000) == 90


def test_ggr_value_score_hand_computed() -> None:
    assert ggr_value_score(10, 4) == 300  # 10²·(4−1)
    assert ggr_value_score(50, 1) == 0  # a value seen once saves nothing


def test_token_hit_rate() -> None:
    assert token_hit_rate(30, 120) == 0.25 and token_hit_rate(0, 0) == 0.0


def test_fixed_order_puts_long_repeated_column_first_and_sorts() -> None:
    rows = [("r1", "long shared info A"), ("r2", "long shared info B"), ("r3", "long shared info A")]
    assert fixed_order(rows, 2) == (1, 0)
    assert sort_rows(rows, (1, 0)) == [0, 2, 1]


def test_dedup_fans_out() -> None:
    d = dedup(["a", "b", "a", "c", "b"])
    assert d.first == (0, 1, 3) and d.index == (0, 1, 0, 2, 1) and d.saved == 2


def test_functional_dependencies_and_near_unique() -> None:
    rows = [("m1", "Title 1", "u1"), ("m1", "Title 1", "u2"), ("m2", "Title 2", "u3"), ("m3", "Title 2", "u4")]
    fds = functional_dependencies(rows, (0, 1, 2))
    assert fds[0] == (1,)  # link → title
    assert 0 not in fds[1]  # title 2 has two links
    assert set(fds[2]) == {0, 1}  # a unique column determines everything
    assert near_unique_columns(rows, (0, 1, 2), 0.9) == (2,)


def test_ggr_groups_by_the_best_value_keeps_dependents_adjacent_and_unique_last() -> None:
    info = ["x" * 40, "y" * 40]
    rows = [("u0", "A", info[0]), ("u1", "B", info[1]), ("u2", "A", info[0]), ("u3", "B", info[1]),
            ("u4", "A", info[0])]
    out = ggr(rows, 3)
    assert sorted(i for i, _ in out) == list(range(5))
    # the group of A (3 rows, 41 chars with its dependent info) comes first, then B's
    assert [i for i, _ in out] == [0, 2, 4, 1, 3]
    for _, order in out:
        assert order[-1] == 0  # near-unique id last
        assert order[:2] in ((1, 2), (2, 1))  # the grouping column and its dependent together


def test_ggr_bounded_recursion_falls_back_to_fixed_order() -> None:
    rows = [(f"v{i % 3}", f"w{i % 2}", f"u{i}") for i in range(12)]
    out = ggr(rows, 3, GGRConfig(max_depth=0))
    orders = {o for _, o in out}
    assert len(orders) == 1  # depth 0: one fixed order for all rows
    chunked = ggr(rows, 3, GGRConfig(split_rows=5))
    assert sorted(i for i, _ in chunked) == list(range(12))


def test_templates_layout_and_placeholder_mismatch() -> None:
    t = parse_template("Is {movie info} for kids given {review}?", 2)
    assert t.labels == ("movie info", "review")
    assert layout(t, ["I", "R"], (1, 0), "Answer Yes or No.") == \
        "Is movie info for kids given review?\nreview: R\nmovie info: I\nAnswer Yes or No."
    with pytest.raises(SQLInputError, match="1 placeholder"):
        parse_template("Summarise {review}", 2)
    with pytest.raises(SQLInputError, match="duplicate"):
        parse_template("{a} {a}", 2)


def test_plan_op_nulls_oversized_cells_and_dedup() -> None:
    op = LLMOp("LLM_FILTER", parse_template("Kids? {info} {review}", 2), OutputSpec("bool"), 4)
    big = "z" * 2000
    rows = [("info A " * 10, "good"), ("info A " * 10, "good"), (None, "bad"), ("info A " * 10, big),
            ("info A " * 10, "fine")]
    p = plan_op(op, rows, parse_optimize("dedup"), max_cell=1000)
    assert p.row_error[2] == "NULL in field 'info'"
    assert "exceeds the 1000-byte limit" in (p.row_error[3] or "")
    assert p.dedup_saved == 1 and len(p.requests) == 2 and p.chosen == "original"
    assert p.row_request == [0, 0, None, None, 1]
    assert p.requests[0].prompt == "Kids? info review\ninfo: " + "info A " * 10 + "\nreview: good\nAnswer Yes or No."


def test_paper_form_names_fields_after_columns() -> None:
    t = parse_template("Is this movie for kids?", 2, ["movie_info", "review"])
    assert t.labels == ("movie_info", "review") and t.instruction == "Is this movie for kids?"
    assert layout(t, ["I", "R"], (1, 0)) == "Is this movie for kids?\nreview: R\nmovie_info: I\n"
    assert parse_template("Sum up", 3, ["a", "a", ""]).labels == ("a", "a (2)", "field 3")


def test_parse_optimize() -> None:
    assert parse_optimize("all") == ALL
    assert parse_optimize("dedup, ggr").names == ("dedup", "ggr")
    with pytest.raises(SQLInputError, match="unknown optimisation"):
        parse_optimize("fast")


class LinearCost:
    def iteration_time(self, prefill_tokens: int, prefill_attended: float, decode_seqs: int,
                       decode_context: float) -> float:
        return 0.01 + 0.001 * prefill_tokens


SMALL_ENGINE = EngineShape(1, 16, 200, 100_000, LinearCost())  # type: ignore[arg-type]  # ~5 calls an iteration


def test_the_planner_keeps_the_tables_own_order_when_grouping_loses() -> None:
    """Pairs of rows sharing a long field, 30 rows apart: in the table's order the second of a
    pair comes iterations after the first and hits it; sorted, a pair is admitted in one
    iteration and computes the field twice. The planner estimates both and keeps the original."""
    op = LLMOp("LLM_FILTER", parse_template("Kids?", 2, ["info", "id"]), OutputSpec("bool"), 4)
    rows = [(f"film {i % 30} " + "plot " * 30, f"row {i}") for i in range(60)]
    p = plan_op(op, rows, parse_optimize("sort,reorder,ggr"), shape=SMALL_ENGINE)
    est = {e.plan: e for e in p.estimates}
    assert est["sort"].hit_tokens < est["original"].hit_tokens
    assert p.chosen == "original" and [r.prompt.split("\n")[1] for r in p.requests[:2]] == \
        ["info: film 0 " + "plot " * 30, "info: film 1 " + "plot " * 30]
