"""`flowserve sql` and the llm_sql workload kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.errors import FlowserveError
from flowserve.workloads import load_workload

runner = CliRunner()


def table(tmp_path: Path) -> Path:
    p = tmp_path / "films.csv"
    p.write_text("title,info,review\n" + "".join(f"t{i % 3},info of film {i % 3} " + "word " * 20 + f",review {i}\n"
                                                   for i in range(12)))
    return p


def test_sql_command_writes_rows_and_report_and_says_answers_are_modelled(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["sql", "SELECT title, LLM_FILTER('Kids?', info, review) AS k "
                              "FROM films", "--table", f"films={table(tmp_path)}", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "answers MODELLED" in res.output
    data = json.loads(out.read_text())
    assert data["columns"] == ["title", "k", "llm_error"] and len(data["rows"]) == 12
    assert data["report"]["calls"] == 12 and data["report"]["answers"] == "modelled"
    assert data["report"]["operators"][0]["plan"] in ("original", "reorder", "ggr", "ggr+sort+warmup",
                                                      "reorder+sort+warmup", "ggr+sort", "reorder+sort", "sort")


def test_sql_explain_prints_every_candidate_and_runs_nothing(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    res = runner.invoke(app, ["sql", "SELECT LLM('Sum up', review, info) FROM films", "--table",
                              str(table(tmp_path)), "--explain", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "← chosen" in res.output and "original" in res.output and "{" not in res.output
    (op,) = json.loads(out.read_text())["explain"]
    assert op["calls"] == 12 and [c["plan"] for c in op["candidates"]][:2] == ["original", "sort"]
    assert op["plan"] in [c["plan"] for c in op["candidates"]]


def test_explain_never_executes_the_statement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["sql", "COPY (SELECT 1) TO 'x.csv'", "--explain"])
    assert res.exit_code == 2 and "nothing was run" in res.output
    assert not (tmp_path / "x.csv").exists()


def test_sql_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    t = table(tmp_path)
    for args, msg in [(["SELECT LLM('Sum {a} {b}', review) FROM films", "--table", f"films={t}"], "placeholder"),
                      (["SELECT 1", "--table", "films=/nope.csv"], "no such file"),
                      (["SELECT 1", "--optimize", "fast"], "unknown optimisation"),
                      (["SELECT 1", "--class", "urgent"], "query_class"),
                      (["SELECT LLM('x {a}', a) FROM films", "--table", f"films={t}"], "a")]:
        res = runner.invoke(app, ["sql", *args])
        assert res.exit_code == 2, res.output
        assert "error:" in res.output and msg in res.output
    res = runner.invoke(app, ["sql", "SELECT 1", "--limit", "-5"])
    assert res.exit_code == 2 and "greater than or equal to 0" in res.output


def test_a_statement_where_every_row_failed_exits_non_zero(tmp_path: Path) -> None:
    res = runner.invoke(app, ["sql", "SELECT LLM('Sum up', review) FROM films", "--table", str(table(tmp_path)),
                              "--gateway", "http://127.0.0.1:9", "--optimize", "none"])
    assert res.exit_code == 1, res.output
    assert "every row failed (12): gateway unreachable" in res.output


def test_help_says_the_cli_has_full_duckdb_power() -> None:
    res = runner.invoke(app, ["sql", "--help"], terminal_width=200)
    assert "full power" in res.output and "sandboxed" in res.output and "--api-key" in res.output


def test_llm_sql_workload_kind_is_one_query(tmp_path: Path) -> None:
    w = load_workload(str(_yaml(tmp_path, table(tmp_path), "SELECT LLM_FILTER('Kids?', info, review) FROM films")))
    (q,) = w.queries
    assert len(q.plan.calls()) == 12 and q.cls == "batch"


def test_llm_sql_workload_is_sandboxed(tmp_path: Path) -> None:
    """A simulated statement reads only its registered table and writes nothing."""
    t = table(tmp_path)
    for query in (f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'", "SELECT * FROM read_csv('/etc/passwd')"):
        with pytest.raises(FlowserveError, match="disabled by configuration"):
            load_workload(str(_yaml(tmp_path, t, query)))
    assert not (tmp_path / "x.csv").exists()


def _yaml(tmp_path: Path, t: Path, query: str) -> Path:
    y = tmp_path / "w.yaml"
    y.write_text(json.dumps({"kind": "llm_sql", "table": str(t), "optimize": "all", "seed": 1, "query": query}))
    return y
