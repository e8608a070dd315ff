"""Fixtures of the Text-to-SQL agent's tests: the shipped Chinook questions, prepared
settings (catalogs and value indexes are built once per module) and the scripted
OpenAI-compatible engine over HTTP."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_engine import ScriptedEngine
from text2sql_script import Text2SQLScript

from flowserve.apps.text2sql import TEXT2SQL
from flowserve.apps.text2sql.evaluate import Question, load_questions


@pytest.fixture(scope="session")
def chinook_questions() -> list[Question]:
    return load_questions("chinook")


@pytest.fixture(scope="session")
def prepared() -> Iterator[dict[str, Any]]:
    settings = TEXT2SQL.prepare({"databases": {"chinook": "chinook", "bank": "builtin"}, "max_rounds": 2})
    yield settings  # type: ignore[misc]
    for path in settings["_cleanup"]:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def engine(chinook_questions: list[Question]) -> Iterator[ScriptedEngine]:
    script = Text2SQLScript({q.question: q.gold_sql for q in chinook_questions})
    with ScriptedEngine(script) as eng:
        yield eng
