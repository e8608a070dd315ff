"""The real public tables (shipped by PyPI packages, read offline) and the bench's goals."""

from __future__ import annotations

import pytest

import flowserve.sql as fsql
from flowserve.bench.llmsql_tables import goals, summarise, table_names
from flowserve.sql.errors import SQLInputError
from flowserve.sql.queries import REAL
from flowserve.sql.real_tables import TABLES, real_table, real_tables
from flowserve.sql.statement import analyse

SHAPES = {"airports": (3376, 7), "weather": (1461, 6), "cars": (406, 9), "penguins": (344, 17),
          "subdivisions": (5046, 4), "languages": (7923, 4)}


@pytest.mark.parametrize("name", list(TABLES))
def test_each_table_loads_with_its_shape_and_its_statements_parse(name: str) -> None:
    t = real_table(name)
    assert (t.num_rows, t.num_columns) == SHAPES[name]
    assert sorted(REAL[name]) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    for q in REAL[name].values():
        st = analyse(q)
        assert st.ops and st.prefetch and all("{" not in op.template.text for op in st.ops.values())


def test_a_real_statement_never_loses_to_the_tables_own_order() -> None:
    runs = {}
    for opt in ("none", "all"):
        with fsql.connect(cluster="paper-l4", optimize=opt) as c:
            for n, t in real_tables("cars").items():
                c.register(n, t)
            runs[opt] = c.sql(REAL["cars"]["Q4"]).report
    assert runs["all"]["latency_s"] < runs["none"]["latency_s"]
    assert runs["all"]["token_hit_rate"] > runs["none"]["token_hit_rate"]
    assert runs["all"]["operators"][0]["plan"] != "original"


def test_goals_hand_computed() -> None:
    def run(t: float, h: float) -> dict[str, float]:
        return {"latency_s": t, "token_hit_rate": h}

    res = {"a/Q1": summarise("a/Q1", {"none": run(10, 0.2), "all": run(4, 0.5)}, grouped=False),
           "b/Q1": summarise("b/Q1", {"none": run(10, 0.6), "all": run(10, 0.55)}, grouped=True)}
    g = goals(res)
    # speed-ups 2.5× and 1×: mean 1.75×; the ungrouped table gains 30 points; b loses hit rate
    assert g["mean_speedup"]["value"] == pytest.approx(1.75) and not g["mean_speedup"]["met"]
    assert g["mean_hit_gain_pts_ungrouped"]["value"] == pytest.approx(30.0)
    assert g["all_never_below_none"] == {"met": False, "losses": ["b/Q1"]}


def test_table_names() -> None:
    assert table_names("all") == list(TABLES) and table_names("cars, weather") == ["cars", "weather"]
    with pytest.raises(SQLInputError, match="unknown table"):
        table_names("cars,nope")
