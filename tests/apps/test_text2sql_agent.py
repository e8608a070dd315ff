"""The CHESS-style agent end to end: the live gateway driver against a scripted
OpenAI-compatible engine over HTTP (real retrieval, real SQL in the sandbox), the same
workflow in the simulator with modelled lengths, and every bad input failing its query
with the reason."""

from __future__ import annotations

import re
from typing import Any

import pytest
from live_support import run
from scripted_engine import ScriptedEngine
from text2sql_script import Text2SQLScript

from flowserve.apps.text2sql import TEXT2SQL
from flowserve.apps.text2sql.agent import AgentConfig
from flowserve.apps.text2sql.modelled import ModelledRun, agent_workload, simulate_agent
from flowserve.errors import ConfigError, RequestError
from flowserve.host.query import QueryResult
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef

MODEL = "llama-3.1-8b"
QUESTION = "How many albums does AC/DC have?"
GOLD = "SELECT COUNT(*) FROM Album a JOIN Artist ar ON a.ArtistId = ar.ArtistId WHERE ar.Name = 'AC/DC'"


def spec(url: str) -> InstanceSpec:
    return InstanceSpec("e", "A100-80G", MODEL, backend="openai", url=url)


def ask(prepared: dict[str, Any], url: str, question: str, database: str = "chinook",
        settings: GatewaySettings | None = None) -> QueryResult:
    async def body() -> QueryResult:
        d = compose_driver([spec(url)], settings or GatewaySettings(),
                           workflows={"text2sql": lambda q, db: TEXT2SQL.build({"question": q, "database": db},
                                                                               prepared, None)})
        d.tools.register(TEXT2SQL.tools(prepared))
        await d.start()
        try:
            return await d.run("text2sql", WorkflowRef("text2sql", (question, database)))
        finally:
            await d.shutdown()
    return run(body())


def prompt_of(engine: ScriptedEngine, stage: str) -> str:
    return next(text for s, text in engine.seen if s == stage)


def test_every_stage_runs_live_and_unit_tests_pick_the_revised_candidate(prepared, engine) -> None:
    r = ask(prepared, engine.url, QUESTION)
    assert r.status == "completed", r.reason
    out = r.output
    # candidate 0 ran but was wrong; candidate 1 failed, was revised with the real error, and won the tests
    assert out["sql"] == GOLD and out["rows"] == [[2]] and out["chosen"] == 1
    assert out["candidates"][0]["sql"] == "SELECT 42" and out["candidates"][1]["rounds"] == 1
    assert out["calls"] == {"extract_keywords": 1, "select_schema": 1, "generate_candidate": 2, "revise": 1,
                            "generate_unit_test": 1, "evaluate": 2}
    assert [c["score"] for c in out["candidates"]] == [0, 2]
    assert engine.stages()[:2] == ["extract_keywords", "select_schema"]
    # entity retrieval found the database value behind the keyword, and the candidates see it
    assert "Artist.Name = 'AC/DC'" in prompt_of(engine, "select_schema")
    cand = prompt_of(engine, "generate_candidate")
    assert "Artist.Name = 'AC/DC'" in cand
    # schema selection pruned the schema: only the chosen tables reach the candidates
    assert out["tables"] == ["Album", "Artist"]
    assert "CREATE TABLE Album" in cand and "CREATE TABLE Invoice" not in cand
    assert "CREATE TABLE Invoice" in prompt_of(engine, "select_schema")
    # the revision is prompted with SQLite's own error about the misspelt table
    assert "no such table: Albums" in prompt_of(engine, "revise")
    assert "Candidate 0" in prompt_of(engine, "evaluate") and "[[2]]" in prompt_of(engine, "evaluate")
    assert {c.stage for c in r.calls} == set(out["calls"]) and all(c.ready is not None for c in r.calls)


def test_a_question_with_no_tables_fails_with_the_reason(prepared, chinook_questions) -> None:
    script = Text2SQLScript({QUESTION: GOLD}, overrides={"select_schema": "NONE"})
    with ScriptedEngine(script) as eng:
        r = ask(prepared, eng.url, QUESTION)
    assert r.status == "failed"
    assert r.reason is not None and "no table of database 'chinook' can answer the question" in r.reason
    assert "generate_candidate" not in eng.stages()


def test_a_model_that_answers_with_no_sql_fails_the_query(prepared) -> None:
    script = Text2SQLScript({QUESTION: GOLD}, overrides={"generate_candidate": "I cannot tell.",
                                                         "revise": "Sorry, no idea."})
    with ScriptedEngine(script) as eng:
        r = ask(prepared, eng.url, QUESTION)
    assert r.status == "failed" and "the model's answer holds no SQL" in (r.reason or "")
    assert eng.stages().count("revise") == 4  # 2 candidates × max_rounds 2, then it gives up


def test_sql_that_never_finishes_is_stopped_and_fails_the_query(prepared) -> None:
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    script = Text2SQLScript({QUESTION: GOLD}, overrides={"generate_candidate": forever, "revise": forever})
    with ScriptedEngine(script) as eng:
        r = ask(prepared, eng.url, QUESTION, settings=GatewaySettings(sql_time_limit_s=0.1))
    assert r.status == "failed"
    assert re.search(r"no candidate SQL ran within 2 revision round\(s\); last error: .*time limit of 0\.1 s",
                     r.reason or "")
    assert "time limit of 0.1 s" in prompt_of(eng, "revise")


def test_sandbox_refusals_reach_the_revision_prompt(prepared, tmp_path) -> None:
    script = Text2SQLScript({QUESTION: GOLD}, overrides={
        "generate_candidate": f"```sql\nATTACH DATABASE '{tmp_path / 'x.sqlite'}' AS p\n```"})
    with ScriptedEngine(script) as eng:
        r = ask(prepared, eng.url, QUESTION)
    assert not (tmp_path / "x.sqlite").exists()
    assert r.status == "completed" and r.output["sql"] == GOLD  # revised into the gold SQL
    assert "refused by the read-only sandbox: ATTACH" in prompt_of(eng, "revise")


def test_duckdb_databases_serve_the_same_agent(tmp_path) -> None:
    import duckdb

    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders (id INTEGER, city VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO orders VALUES (1, 'Lisbon', 10.5), (2, 'Porto', 3.0), (3, 'Lisbon', 1.5)")
    con.close()
    q, gold = "What is the total amount of orders from Lisbon?", "SELECT SUM(amount) FROM orders WHERE city = 'Lisbon'"
    prepared = TEXT2SQL.prepare({"databases": {"shop": str(path)}, "unit_tests": 0})
    with ScriptedEngine(Text2SQLScript({q: gold}, wrong_sql=None)) as eng:
        r = ask(prepared, eng.url, q, database="shop")
    assert r.status == "completed" and r.output["rows"] == [[12.0]]
    assert "orders.city = 'Lisbon'" in prompt_of(eng, "select_schema")
    assert "You are a DuckDB expert" in prompt_of(eng, "generate_candidate")


def test_bad_databases_are_refused_at_start_up(tmp_path) -> None:
    with pytest.raises(ConfigError, match="no file"):
        TEXT2SQL.prepare({"databases": {"x": str(tmp_path / "missing.sqlite")}})
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ConfigError, match=r"cannot read database.*neither a SQLite nor a DuckDB"):
        TEXT2SQL.prepare({"databases": {"x": str(junk)}})
    import sqlite3

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (a)").connection.execute("DROP TABLE t")
    with pytest.raises(ConfigError, match="no tables"):
        TEXT2SQL.prepare({"databases": {"x": str(empty)}})
    with pytest.raises(ConfigError, match=r"candidates must be an integer in \[1, 16\]"):
        TEXT2SQL.prepare({"candidates": 100000})
    with pytest.raises(ConfigError, match="unknown field"):
        TEXT2SQL.prepare({"rounds": 2})


def test_bad_requests_are_request_errors(prepared) -> None:
    with pytest.raises(RequestError, match="question"):
        TEXT2SQL.build({}, prepared, None)
    with pytest.raises(RequestError, match="unknown database 'hr'"):
        TEXT2SQL.build({"question": "q", "database": "hr"}, prepared, None)
    with pytest.raises(RequestError, match="candidates"):
        TEXT2SQL.build({"question": "q", "candidates": 0}, prepared, None)
    assert TEXT2SQL.build({"question": "q", "candidates": 9}, prepared, None).cfg.candidates == 2  # capped


def test_the_same_workflow_runs_in_the_simulator_with_modelled_lengths(prepared, chinook_questions) -> None:
    catalog = prepared["catalogs"]["chinook"]
    questions = [q.question for q in chinook_questions[:12]]
    cluster = [InstanceSpec(n, "A100-80G", MODEL) for n in ("a", "b")]
    # every execution succeeds: no revision, unit tests among the two candidates
    ok = simulate_agent(cluster, agent_workload(questions, "chinook", catalog, AgentConfig(unit_tests=3),
                                               ModelledRun(exec_error_prob=0.0), rate=2.0, seed=1))
    assert len(ok.queries) == 12 and not [q for q in ok.queries if q.failed]
    stages = [c.stage for c in ok.calls]
    assert {s: stages.count(s) for s in set(stages)} == {
        "extract_keywords": 12, "select_schema": 12, "generate_candidate": 24, "generate_unit_test": 12,
        "evaluate": 36}
    # every execution fails: bounded revision rounds, then the query fails with its reason
    bad = simulate_agent(cluster, agent_workload(questions[:3], "chinook", catalog, AgentConfig(max_rounds=2),
                                                ModelledRun(exec_error_prob=1.0), rate=2.0, seed=1))
    assert all(q.failed and "no candidate SQL ran within 2 revision round(s)" in q.failed for q in bad.queries)
    assert sum(c.stage == "revise" for c in bad.calls) == 3 * 2 * 2
    # the prompts are the real ones: the schema-selection prompt holds the whole schema
    sel = next(c for c in ok.calls if c.stage == "select_schema")
    cand = next(c for c in ok.calls if c.stage == "generate_candidate")
    assert sel.input_tokens > 1000 and cand.input_tokens > 300
