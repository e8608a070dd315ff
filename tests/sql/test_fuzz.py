"""Fuzz: LLM-in-SQL statements, templates and `register` — any input gets a result or a
`FlowserveError` with a message, never another exception, and nothing is written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowserve.sql as fsql
from flowserve.errors import FlowserveError
from flowserve.sql.templates import parse_template

TABLE = pa.table({"a": ["x", "y", None, "x"], "b": ["long shared text " * 3, "p", "q", "long shared text " * 3],
                  "n": [1, 2, 3, 4]})
FUNCS = ["LLM", "LLM_FILTER", "LLM_NUMBER", "LLM_CHOICE", "LLM_JSON", "llm", "LLM_NOPE"]
ARGS = ["a", "b", "n", "a || b", "NULL", "upper(a)", "'lit'", "1", "nope", "*", "(SELECT 1)"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _con() -> fsql.connection.Connection:  # type: ignore[name-defined]
    c = fsql.connect(cluster="paper-l4", optimize="all")
    c.register("t", TABLE)
    return c


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@st.composite
def llm_calls(draw: st.DrawFn) -> str:
    fn = draw(st.sampled_from(FUNCS))
    lead = []
    if fn.upper() in ("LLM_CHOICE", "LLM_JSON"):
        lead = [draw(st.sampled_from(["'Yes|No'", "'A|A'", "'|'", "'{\"type\": \"object\"}'", "'{bad'", "a"]))]
    instr = draw(st.one_of(st.text(max_size=40), st.sampled_from(["Kids? {x}", "{a} {b}", "{}", "{ }", "Sum up"])))
    cols = draw(st.lists(st.sampled_from(ARGS), max_size=4))
    return f"{fn}({', '.join([*lead, _quote(instr), *cols])})"


@st.composite
def statements(draw: st.DrawFn) -> str:
    call = draw(llm_calls())
    shape = draw(st.sampled_from([
        "SELECT {c} FROM t", "SELECT a, {c} AS v FROM t WHERE {c}", "SELECT a FROM t WHERE {c} AND n > 1",
        "SELECT a, AVG({c}) FROM t GROUP BY a", "SELECT * FROM t WHERE a IN (SELECT a FROM t WHERE {c})",
        "SELECT {c} FROM t LIMIT 2", "SELECT {c} FROM t ORDER BY {c}", "{c}", "SELECT {c} FROM t; SELECT 1",
        "COPY (SELECT {c} FROM t) TO 'fuzz-out.csv'", "SELECT {c} FROM read_csv('/etc/hostname')"]))
    noise = draw(st.text(max_size=8))
    return shape.format(c=call) + (noise if draw(st.booleans()) else "")


@SETTINGS
@given(statements())
def test_statements_get_a_result_or_a_flowserve_error(sql: str) -> None:
    before = set(os.listdir("."))
    c = _con()
    try:
        res = c.sql(sql)
        assert isinstance(res.report["errors"], list)
    except FlowserveError as e:
        assert str(e).strip()
    finally:
        c.close()
    assert set(os.listdir(".")) == before  # sandboxed: nothing written


@SETTINGS
@given(statements())
def test_explain_gets_a_plan_or_a_flowserve_error(sql: str) -> None:
    c = _con()
    try:
        plan = c.explain(sql)
        assert all("op" in op for op in plan)
    except FlowserveError as e:
        assert str(e).strip()
    finally:
        c.close()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60) | st.text(alphabet='{}":ab \n', max_size=30), st.integers(0, 5),
       st.lists(st.text(max_size=10), max_size=5))
def test_templates_parse_or_refuse(text: str, n: int, names: list[str]) -> None:
    try:
        t = parse_template(text, n, names)
    except FlowserveError as e:
        assert str(e).strip()
        return
    assert len(t.labels) == n and len(set(t.labels)) == n


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='{}"\':ab \n', max_size=40))
def test_doubled_braces_are_literal_braces_whatever_they_hold(text: str) -> None:
    """Issue 35 item 18: any text, its braces doubled, is the instruction as written."""
    t = parse_template(text.replace("{", "{{").replace("}", "}}") + " {field}", 1)
    assert t.labels == ("field",) and t.instruction == (text + " field").strip()


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.text(max_size=40), st.integers(), st.none(), st.binary(max_size=8)),
       st.sampled_from(["table", "int", "none", "missing-file", "dir", "text-file"]))
def test_register_quotes_or_refuses(name: object, kind: str) -> None:
    source = {"table": TABLE, "int": 42, "none": None, "missing-file": "/nope/x.csv", "dir": "/",
              "text-file": str(Path(__file__))}[kind]
    c = fsql.connect(cluster="paper-l4")
    try:
        c.register(name, source)  # type: ignore[arg-type]
    except FlowserveError as e:
        assert str(e).strip()
        return
    finally:
        c.close()
    assert isinstance(name, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and kind == "table"
