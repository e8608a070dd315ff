"""The agent's parts: answer parsers (fuzzed), the catalog and the value index, the
shipped Chinook questions (every gold SQL runs), execution matching and trace records."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.apps.text2sql import chinook_path
from flowserve.apps.text2sql import prompts as P
from flowserve.apps.text2sql.catalog import read_catalog
from flowserve.apps.text2sql.entities import EntityIndex, column_context, parse_keywords
from flowserve.apps.text2sql.evaluate import DIFFICULTIES, execution_match, load_questions, result_set, summarize
from flowserve.apps.text2sql.record import trace_entry, write_agent_trace
from flowserve.errors import ConfigError
from flowserve.workloads.agent_trace import read_agent_trace


def test_answers_are_read_in_each_stage_format() -> None:
    assert parse_keywords("['AC/DC', \"albums\", 'AC/DC']") == ["AC/DC", "albums"]
    assert parse_keywords("- Brazil\n- customers") == ["Brazil", "customers"]
    assert parse_keywords('{"keywords": ["AC/DC", "albums, 1979", 3]}') == ["AC/DC", "albums, 1979"]
    assert P.parse_tables("Tables: album, Artist, Foo", ["Album", "Artist", "Track"]) == ("Album", "Artist")
    assert P.parse_tables("NONE", ["Album"]) == ()
    assert P.extract_sql("```sql\nSELECT 1\n```") == "SELECT 1"
    assert P.extract_sql("Sure: select a from t; and more") == "select a from t;"
    assert P.extract_sql("I cannot tell.") == ""
    assert P.parse_unit_tests("1. one row\n\n- not empty\n3) sorted", 2) == ["one row", "not empty"]
    assert P.parse_verdicts("Candidate 0: pass\ncandidate #1 - FAILED\nCandidate 0: fail") == {0: True, 1: False}


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_parsers_are_total(text: str) -> None:
    kws = parse_keywords(text)
    assert len(kws) <= 20 and all(k and len(k) <= 100 for k in kws)
    assert set(P.parse_tables(text, ["Album", "Track"])) <= {"Album", "Track"}
    assert isinstance(P.extract_sql(text), str)
    assert len(P.parse_unit_tests(text, 3)) <= 3
    assert all(isinstance(k, int) and isinstance(v, bool) for k, v in P.parse_verdicts(text).items())


def test_catalog_describes_tables_columns_and_keys() -> None:
    cat = read_catalog(chinook_path(), {"Album": {"description": "records", "columns": {"Title": "the name"}}})
    assert len(cat.tables) == 11
    assert "ArtistId INTEGER REFERENCES Artist(ArtistId)" in cat.schema(("Album",))
    assert "CREATE TABLE Track" not in cat.schema(("Album",))
    desc = cat.descriptions(("Album",))
    assert "Album: records" in desc and "Album.Title: the name (NVARCHAR(160); e.g. 'For Those" in desc
    assert "AC/DC" in cat.values[("Artist", "Name")]


def test_entity_index_matches_values_despite_misspellings(prepared) -> None:
    cat = prepared["catalogs"]["chinook"]
    index = prepared["indexes"].get(cat.path)
    assert isinstance(index, EntityIndex)
    assert len(index) > 5000
    hits = {(t, c, v) for t, c, v, _ in index.lookup(["Aerosmit", "brazil", "zzzzqqq"])}
    assert ("Artist", "Name", "Aerosmith") in hits
    assert ("Customer", "Country", "Brazil") in hits
    assert not any("zzz" in v.lower() for _, _, v in hits)
    ctx = column_context(cat, ["billing country"])
    assert ctx.splitlines()[0].startswith("Invoice.BillingCountry")


def test_the_chinook_questions_are_graded_and_every_gold_sql_runs() -> None:
    qs = load_questions("chinook")
    assert len(qs) >= 40 and len({q.id for q in qs}) == len(qs)
    for d in DIFFICULTIES:
        assert sum(q.difficulty == d for q in qs) >= 10
    for q in qs:
        assert result_set(chinook_path(), q.gold_sql), q.id  # runs in the sandbox, not empty


def test_execution_match_compares_result_sets() -> None:
    db = chinook_path()
    gold = "SELECT Name FROM Genre WHERE GenreId <= 2"
    same = "SELECT Name FROM Genre WHERE GenreId IN (2, 1) ORDER BY Name DESC"
    assert execution_match(db, same, gold) == (True, None)
    assert execution_match(db, "SELECT Name FROM Genre", gold) == (False, "different result")
    ok, why = execution_match(db, "SELECT * FROM Genres", gold)
    assert not ok and "no such table" in (why or "")
    assert execution_match(db, "", gold) == (False, "no SQL")
    with pytest.raises(ConfigError, match="gold SQL fails"):
        execution_match(db, "SELECT 1", "SELECT * FROM nowhere")


def test_bad_question_files_name_the_line(tmp_path) -> None:
    p = tmp_path / "q.jsonl"
    p.write_text('{"id": "a", "question": "q?", "gold_sql": "SELECT 1"}\n{"id": "b", "question": ""}\n')
    with pytest.raises(ConfigError, match=r"q\.jsonl:2: not a question line"):
        load_questions(str(p))
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_questions(str(p))
    with pytest.raises(ConfigError, match="cannot read questions"):
        load_questions(str(tmp_path / "none.jsonl"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=60), st.dictionaries(st.sampled_from(["id", "question", "gold_sql"]),
                                                                 st.one_of(st.text(max_size=10), st.integers())),
                          st.integers()), max_size=4))
def test_fuzz_question_loading_is_a_clean_error_or_questions(tmp_path_factory, lines) -> None:
    p = tmp_path_factory.mktemp("fz") / "q.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    try:
        qs = load_questions(str(p))
    except ConfigError as e:
        assert str(e)
    else:
        assert all(q.question.strip() and q.gold_sql.strip() for q in qs)


def test_recorded_runs_are_published_traces_the_replay_reads(tmp_path) -> None:
    calls = [{"stage": "extract_keywords", "prompt_tokens": 120, "output_tokens": 9, "latency_s": 0.1},
             {"stage": "generate_candidate", "prompt_tokens": 900, "output_tokens": 40},
             {"stage": "generate_candidate", "prompt_tokens": 900, "output_tokens": 35}]
    entries = [trace_entry(calls, question_id="q1", status="completed", arrival_s=0.0, latency_s=1.5),
               trace_entry([], question_id="q2", status="failed", arrival_s=0.2, latency_s=0.1)]
    assert write_agent_trace(tmp_path / "t.json", entries) == 1  # a query without calls is left out
    trace = read_agent_trace(str(tmp_path / "t.json"))
    assert trace.queries == ((("extract_keywords", 120, 9), ("generate_candidate", 900, 40),
                              ("generate_candidate", 900, 35)),)
    s = summarize([])
    assert s["questions"] == 0 and s["execution_accuracy"] == 0.0
