"""Statements end to end on a simulated cluster (the simulator driver, modelled answers)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import flowserve.sql as fsql
from flowserve.errors import FlowserveError
from flowserve.sql.errors import SQLInputError, StatementFailed
from flowserve.sql.queries import MOVIES, MOVIES_CSV, query


def small() -> pa.Table:
    info = {"a": "A long movie description about a gorilla " * 3, "b": "A haunted house story told slowly " * 3}
    movies = ["a", "a", "b", "a", "b", "a", "b", "a"]
    return pa.table({"title": movies, "info": [info[m] for m in movies],
                     "review": ["great fun", "boring", "scary", None, "great fun", "ok", "bad", "great fun"],
                     "fresh": [True, False, True, True, False, True, True, False]})


def con(optimize: str = "all", **kw) -> fsql.connection.Connection:  # type: ignore[name-defined]
    c = fsql.connect(cluster="paper-l4", optimize=optimize, **kw)
    c.register("m", small())
    return c


Q2 = "SELECT title, review FROM m WHERE LLM_FILTER('Kids? {info} {review}', info, review) AND fresh ORDER BY 1, 2"


def test_results_do_not_depend_on_the_optimisations_and_calls_shrink() -> None:
    base = con("none").sql(Q2)
    best = con("all").sql(Q2)
    assert base.rows == best.rows
    assert best.report["calls"] < base.report["calls"]
    # predicate ordering: only the 4 fresh non-NULL rows are sent
    assert best.report["calls"] == 4 and base.report["calls"] == 7


def test_projection_in_row_order_with_null_rows_and_error_column() -> None:
    r = con().sql("SELECT title, LLM_CHOICE('Positive|Negative|Neutral', 'Sentiment of {review}', review) AS s "
                  "FROM m")
    assert r.columns == ["title", "s", "llm_error"]
    assert [row[0] for row in r.rows] == small().column("title").to_pylist()
    assert r.rows[3][1] is None and r.rows[3][2] == "NULL in field 'review'"
    assert all(row[1] in ("Positive", "Negative", "Neutral") for i, row in enumerate(r.rows) if i != 3)
    assert sum(e is not None for *_, e in r.rows) == 1


def test_on_error_fail_fails_the_statement() -> None:
    with pytest.raises(StatementFailed, match="NULL in field"):
        con(on_error="fail").sql("SELECT LLM('Sum up {review}', review) FROM m")


def test_limit_is_pushed_below_the_llm_projection() -> None:
    r = con().sql("SELECT LLM('Sum up {review}', review) AS s FROM m WHERE fresh LIMIT 2")
    assert len(r.rows) == 2 and r.report["calls"] == 2


def test_aggregate_parses_numbers_and_result_cache_spans_statements() -> None:
    c = con(cache=True)
    q = "SELECT title, AVG(LLM_NUMBER('Score {review}', review)) AS s FROM m GROUP BY title ORDER BY title"
    first = c.sql(q)
    assert all(0 <= row[1] <= 5 for row in first.rows)
    again = c.sql(q)
    assert again.rows == first.rows
    assert again.report["result_cache_hits"] > 0 and again.report["calls_sent"] == 0


def test_bad_input_gets_clear_errors(tmp_path: Path) -> None:
    c = con()
    with pytest.raises(SQLInputError, match="placeholder"):
        c.sql("SELECT LLM('Sum up {review}', review, info) FROM m")
    with pytest.raises(SQLInputError, match="nope"):
        c.sql("SELECT LLM('Sum up {review}', nope) FROM m")
    with pytest.raises(SQLInputError, match="string literal"):
        c.sql("SELECT LLM(review, review) FROM m")
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\n1,caf\xe9\n")
    with pytest.raises(SQLInputError, match=r"not UTF-8.*line 2"):
        c.register("bad", bad)


def test_a_1mb_cell_is_that_rows_error() -> None:
    c = fsql.connect(cluster="paper-l4")
    c.register("t", pa.table({"x": ["short", "y" * (1 << 20)]}))
    r = c.sql("SELECT LLM('Sum up {x}', x) AS s FROM t")
    assert r.rows[0][0] is not None and r.rows[1][0] is None and "exceeds" in r.rows[1][1]


@pytest.mark.parametrize("name", ["Q1", "Q2", "Q3", "Q4"])
def test_paper_queries_run_on_movies_and_planning_raises_the_hit_rate(name: str) -> None:
    results = {}
    for opt in ("none", "all"):
        c = fsql.connect(cluster="paper-l4", optimize=opt)
        c.register("movies", MOVIES_CSV)
        results[opt] = c.sql(MOVIES[name].replace("FROM movies", "FROM (SELECT * FROM movies LIMIT 200) movies"))
    none, best = sorted(results["none"].rows, key=str), sorted(results["all"].rows, key=str)
    if name in ("Q1", "Q4"):  # another field order is another prompt, so another modelled answer
        none, best = [r[:-2] for r in none], [r[:-2] for r in best]
    assert none == best
    assert results["all"].report["latency_s"] <= results["none"].report["latency_s"]
    assert results["all"].report["token_hit_rate"] >= results["none"].report["token_hit_rate"]
    assert query(name) == MOVIES[name]


def test_explain_reports_each_operator_and_its_candidates() -> None:
    plan = con().explain(Q2)
    (op,) = plan
    assert op["op"] == "LLM_FILTER" and op["calls"] == 4 and (op["rows"], op["rows_failed_before_calls"]) == (5, 1)
    names = [c["plan"] for c in op["candidates"]]
    assert names[0] == "original" and {"sort", "ggr", "ggr+sort"} <= set(names) and op["plan"] in names
    chosen = next(c for c in op["candidates"] if c["plan"] == op["plan"])
    assert chosen["time_s"] == min(c["time_s"] for c in op["candidates"]) or op["plan"] == "original"


def test_explain_estimate_follows_the_simulated_engines() -> None:
    """The planner's engine model against the simulator on a real table: the chosen plan's
    estimated hit rate and time are those the simulated engines measure, within 5%."""
    c = fsql.connect(cluster="paper-l4", optimize="all")
    c.register("movies", MOVIES_CSV)
    q = MOVIES["Q2"].replace("FROM movies", "FROM (SELECT * FROM movies LIMIT 400) movies")
    (op,) = c.explain(q)
    rep = c.sql(q).report
    assert rep["calls"] == op["calls"]
    assert abs(rep["token_hit_rate"] - op["token_hit_rate"]) < 0.05
    assert abs(rep["latency_s"] - op["time_s"]) < 0.05 * rep["latency_s"]



def test_the_papers_call_form_for_every_function() -> None:
    c = con()
    r = c.sql("SELECT LLM('Sum up', review) AS a, LLM_FILTER('Kids?', info, review) AS b, "
              "LLM_NUMBER('Score', review) AS n, LLM_CHOICE('Good|Bad', 'Verdict', review, title) AS ch, "
              "LLM_JSON('{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}}}', "
              "'Judge', title), LLM('Title only', title) FROM m")
    assert r.columns == ["a", "b", "n", "ch", "LLM_JSON('{\"type\": \"object\", \"properties\": {\"ok\": "
                         "{\"type\": \"boolean\"}}}', 'Judge', title)", "LLM('Title only', title)", "llm_error"]
    row = r.rows[0]
    assert isinstance(row[1], bool) and 0 <= row[2] <= 5 and row[3] in ("Good", "Bad") and '"ok"' in row[4]
    prompts = [req.prompt for p in c.executor.planned for req in p.requests]  # type: ignore[union-attr]
    assert "Verdict\nreview: great fun\ntitle: a\nAnswer with exactly one of: Good, Bad." in prompts


def test_a_prompt_past_every_context_fails_its_row_without_a_call() -> None:
    c = fsql.connect(cluster="paper-l4")
    c.register("t", pa.table({"x": ["short", "word " * 40_000], "y": ["short", "word " * 40_000]}))
    r = c.sql("SELECT LLM('Sum up', x, y) AS s FROM t")  # 80k tokens: past the L4's 54k
    assert r.rows[0][0] is not None and r.rows[1][0] is None
    assert "exceeds the context of every instance" in r.rows[1][1]
    assert r.report["calls"] == 1


def test_register_refuses_names_that_are_not_identifiers(tmp_path: Path) -> None:
    c = con()
    evil = f'x"; COPY (SELECT 1) TO \'{tmp_path / "pwn.csv"}\'; --'
    for name in (evil, "", "1abc", "a b", 42, None):
        with pytest.raises(SQLInputError, match="table name"):
            c.register(name, small())  # type: ignore[arg-type]
    assert not (tmp_path / "pwn.csv").exists()
    c.register("select", small())  # a keyword is an identifier: quoted everywhere
    assert c.sql('SELECT count(*) FROM "select"').rows == [(8,)]
    with pytest.raises(SQLInputError, match=r"pyarrow\.Table"):
        c.register("x", 42)  # type: ignore[arg-type]


def test_python_api_raises_flowserve_errors_with_a_message() -> None:
    for call in (lambda: fsql.connect(cluster=[]), lambda: fsql.connect(cluster=123),  # type: ignore[arg-type]
                 lambda: fsql.connect(cluster="paper-l4", max_tokens=-5),
                 lambda: fsql.connect(cluster="paper-l4", optimize=5),  # type: ignore[arg-type]
                 lambda: fsql.connect(cluster="paper-l4", seed="x"),  # type: ignore[arg-type]
                 lambda: fsql.connect(gateway=5),  # type: ignore[arg-type]
                 lambda: con().sql(None),  # type: ignore[arg-type]
                 lambda: con().sql("SELECT LLM('hi \ud800', title) FROM m")):
        with pytest.raises(FlowserveError) as info:
            call()
        assert str(info.value)
    huge = con().sql("SELECT LLM('" + "word " * 524_000 + "', title) AS s FROM m")  # an instruction past the context
    assert all(v is None and "exceeds the context of every instance" in e for v, e in huge.rows)


def test_statements_are_sandboxed_unless_external_access(tmp_path: Path) -> None:
    c = con()
    for q in (f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'", "SELECT * FROM read_csv('/etc/hostname')",
              f"ATTACH '{tmp_path / 'x.db'}'", "SET enable_external_access = true"):
        with pytest.raises(SQLInputError):
            c.sql(q)
    assert list(tmp_path.iterdir()) == []
    assert c.db.sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
    full = fsql.connect(cluster="paper-l4", external_access=True)
    full.sql(f"COPY (SELECT 1 AS one) TO '{tmp_path / 'x.csv'}'")
    assert (tmp_path / "x.csv").read_text().strip() == "one\n1"
    assert full.db.sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]


def test_large_inputs_run_in_chunks_with_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are planned PREFETCH_ROWS at a time and the simulated plan flushed in parts:
    the answers are those of one pass, equal rows across chunks are called once."""
    from flowserve.sql import connection, sim_backend

    q = "SELECT title, LLM_FILTER('Kids?', info, review) AS k FROM m"
    whole = con("dedup").sql(q)
    monkeypatch.setattr(connection, "PREFETCH_ROWS", 3)
    monkeypatch.setattr(sim_backend, "FLUSH_CALLS", 2)
    seen: list[int] = []
    c = fsql.connect(cluster="paper-l4", optimize="dedup", on_progress=lambda s: seen.append(s.rows))
    c.register("m", small())
    chunked = c.sql(q)
    assert chunked.rows == whole.rows
    assert chunked.report["calls"] == whole.report["calls"] == 6  # 7 distinct non-NULL rows less 1 repeat
    assert chunked.report["simulated_parts"] >= 2 and len(chunked.report["operators"]) == 3
    assert seen[-1] == 8 and len(seen) >= 3  # progress after every chunk


def test_braces_in_an_instruction_are_text_unless_they_name_a_field() -> None:
    """Issue 35 item 18: a JSON example in an instruction was read as placeholders."""
    r = con().sql("SELECT LLM('Answer as JSON like {\"label\": \"good\"} or {{}} about {review}', review) AS s "
                  "FROM m WHERE review IS NOT NULL")
    assert len(r.rows) == 7 and r.report["calls"] > 0 and all(row[1] is None for row in r.rows)
    from flowserve.sql.templates import parse_template

    t = parse_template('Like {"a": 1}, {{literally}}, {{}} or {{ for {movie} and {user review}', 2)
    assert t.labels == ("movie", "user review")
    assert t.instruction == 'Like {"a": 1}, {literally}, {} or { for movie and user review'
    with pytest.raises(SQLInputError, match="empty placeholder"):
        parse_template("an empty {} placeholder {x}", 1)


def test_an_llm_call_in_group_by_is_the_select_s_own() -> None:
    """Issue 35 item 18: `GROUP BY LLM(...)` as an expression was a DuckDB binder error (the
    alias and ordinal forms worked)."""
    c = con()
    call = "LLM_CHOICE('yes|no', 'Is {review} positive?', review)"
    by_expression = c.sql(f"SELECT {call}, COUNT(*) AS n FROM m GROUP BY {call} ORDER BY 2, 1")
    by_alias = c.sql(f"SELECT {call} AS a, COUNT(*) AS n FROM m GROUP BY a ORDER BY 2, 1")
    assert by_expression.rows == by_alias.rows and sum(n for _, n in by_alias.rows) == 8
    assert by_expression.report["calls"] == by_alias.report["calls"] > 0  # one operator, not two


def test_a_reused_connection_reports_each_statement_alone() -> None:
    """Issue 35 item 18: a second statement's report added the first one's calls and time."""
    c = con()
    q = "SELECT LLM('Sum up {review}', review) FROM m"
    first, again = c.sql(q), c.sql(q)
    assert again.report["calls"] == first.report["calls"] == 5  # 7 reviews, 5 distinct
    assert again.report["latency_s"] == first.report["latency_s"]
    assert again.report["token_hit_rate"] == first.report["token_hit_rate"]
