"""`flowserve sql` and the llm_sql workload kind."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.workloads import load_workload

runner = CliRunner()


def table(tmp_path: Path) -> Path:
    p = tmp_path / "films.csv"
    p.write_text("title,info,review\n" + "".join(f"t{i % 3},info of film {i % 3} " + "word " * 20 + f",review {i}\n"
                                                   for i in range(12)))
    return p


def test_sql_command_writes_rows_and_report(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["sql", "SELECT title, LLM_FILTER('Kids? {info} {review}', info, review) AS k "
                              "FROM films", "--table", f"films={table(tmp_path)}", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["columns"] == ["title", "k", "llm_error"] and len(data["rows"]) == 12
    assert data["report"]["calls"] == 15 and data["report"]["token_hit_rate"] > 0.3


def test_sql_explain_calls_nothing(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    res = runner.invoke(app, ["sql", "SELECT LLM('Sum {review}', review) FROM films", "--table",
                              str(table(tmp_path)), "--explain", "--json", str(out)])
    assert res.exit_code == 0, res.output
    (op,) = json.loads(out.read_text())["explain"]
    assert op["calls"] == 12 and op["column_order"] == [["review"]]


def test_sql_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    t = table(tmp_path)
    for args, msg in [(["SELECT LLM('Sum {a} {b}', review) FROM films", "--table", f"films={t}"], "placeholder"),
                      (["SELECT 1", "--table", "films=/nope.csv"], "no such file"),
                      (["SELECT 1", "--optimize", "fast"], "unknown optimisation"),
                      (["SELECT LLM('x {a}', a) FROM films", "--table", f"films={t}"], "a")]:
        res = runner.invoke(app, ["sql", *args])
        assert res.exit_code == 2, res.output
        assert "error:" in res.output and msg in res.output


def test_llm_sql_workload_kind_is_one_query(tmp_path: Path) -> None:
    t = table(tmp_path)
    w = load_workload(str(_yaml(tmp_path, t)))
    (q,) = w.queries
    assert len(q.plan.calls()) == 15  # 12 rows, 3 prefix warm-ups


def _yaml(tmp_path: Path, t: Path) -> Path:
    y = tmp_path / "w.yaml"
    y.write_text(json.dumps({"kind": "llm_sql", "table": str(t), "optimize": "all", "seed": 1,
                             "query": "SELECT LLM_FILTER('Kids? {info} {review}', info, review) FROM films"}))
    return y
