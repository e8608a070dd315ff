"""The Text-to-SQL agent end to end on a real model: SmolLM2-135M-Instruct on llama-server
answers every stage's prompt; retrieval, the SQL sandbox and the evaluation are real.

The database is Chinook cut to its Artist and Album tables, so the schema prompts stay a
few hundred tokens (the whole schema is ~3,700, minutes per prefill on a busy CPU). A
135M model writes SQL poorly: the test asserts that every stage runs on the model's own
words and that each question ends in an answer or an explicit failure — never a hang, a
silent drop or a made-up success (a failed query reports its reason, not its calls: the
engine's own counters show the model read the prompts); the accuracy is measured
(`flowserve text2sql eval`) and reported, not asserted."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from flowserve.apps.text2sql.evaluate import Question, summarize
from flowserve.bench.text2sql_eval import eval_in_process
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.host.settings import serve_config

pytestmark = pytest.mark.real_engine

ROOT = Path(__file__).resolve().parents[2]
KEEP = ("Artist", "Album")


def artists_and_albums(tmp: Path) -> Path:
    """A copy of the shipped Chinook with only the Artist and Album tables."""
    path = tmp / "chinook-artists.sqlite"
    shutil.copy(ROOT / "flowserve" / "data" / "sqlite" / "chinook.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA foreign_keys = OFF")
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            if name not in KEEP:
                con.execute(f'DROP TABLE "{name}"')
    with sqlite3.connect(path) as con:
        con.execute("VACUUM")
    return path


def test_the_agent_runs_every_stage_on_a_real_model(smollm2_server: LlamaServer,
                                                    chinook_questions: list[Question], tmp_path: Path) -> None:
    db = artists_and_albums(tmp_path)
    questions = [q for q in chinook_questions if q.question in (
        "How many artists are there?", "How many albums does AC/DC have?")]
    assert len(questions) == 2
    config = serve_config({
        "instances": [{"name": "llama", "profile": str(ROOT / "examples" / "profiles" / "smollm2.yaml"),
                       "backend": "openai", "url": smollm2_server.base_url}],
        "gateway": {"engine_kinds": {"llama": "llamacpp"},
                    "workflows": {"text2sql": {"candidates": 2, "max_rounds": 1, "unit_tests": 1,
                                               "max_tokens": 48}}}}, "test")
    before = engine_counters(smollm2_server)
    outcomes, trace = asyncio.run(asyncio.wait_for(eval_in_process(config, str(db), questions, 2), 1500))
    after = engine_counters(smollm2_server)
    for o, entry in zip(outcomes, trace, strict=True):
        assert o.status in ("completed", "failed") and entry["status"] == o.status
        if o.status == "completed":  # an answer: every stage up to the candidates ran on the model's words
            assert {"extract_keywords", "select_schema", "generate_candidate"} <= set(o.calls), o
            assert o.calls["generate_candidate"] == 2 and o.sql.strip(), o
        else:  # an explicit failure, with its reason (what the model wrote, what the sandbox said)
            assert o.reason and len(o.reason) > 10, o
    # the model read the schema prompts and wrote answers (hundreds of tokens each way)
    assert after["prompt_tokens"] - before["prompt_tokens"] > 1000
    assert after["tokens_predicted"] - before["tokens_predicted"] > 50
    summary = summarize(outcomes)
    assert summary["questions"] == 2 and 0 <= summary["execution_accuracy"] <= 1


def engine_counters(server: LlamaServer) -> dict[str, float]:
    """llama-server's own counters (its /metrics): prompt tokens read, tokens written."""
    out = {}
    for line in httpx.get(f"{server.base_url}/metrics", timeout=30).text.splitlines():
        for key in ("prompt_tokens", "tokens_predicted"):
            if line.startswith(f"llamacpp:{key}_total "):
                out[key] = float(line.split()[-1])
    return out
