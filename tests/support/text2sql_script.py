"""A scripted 'model' for the Text-to-SQL agent's tests: it answers every stage in the
stage's format, from the gold SQL of the question it finds in the prompt.

Per question: candidate 0 (seed 0) answers `wrong_sql` (valid SQL, wrong answer) when
given, candidate 1 first answers SQL with a misspelt table (a real execution error),
then the gold SQL when revising; the evaluator passes exactly the candidates whose SQL
is the gold SQL — so the right answer needs revision and the unit tests to win.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


def tables_of(sql: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\b(?:FROM|JOIN)\s+([A-Za-z_]+)", sql, re.I)))


def keywords_of(question: str) -> list[str]:
    quoted = re.findall(r"'([^']+)'", question)
    caps = re.findall(r"\b[A-Z][A-Za-z/]+(?:\s[A-Z][A-Za-z/]+)*", question)
    return list(dict.fromkeys(quoted + [c for c in caps if c not in ("How", "What", "Which", "List", "Who", "In")]))


def broken(sql: str) -> str:
    t = tables_of(sql)[0]
    return re.sub(rf"\b{t}\b", t + "s", sql, count=1)


class Text2SQLScript:
    def __init__(self, gold: Mapping[str, str], wrong_sql: str | None = "SELECT 42",
                 overrides: Mapping[str, str] | None = None) -> None:
        self.gold = dict(gold)
        self.wrong = wrong_sql
        self.overrides = dict(overrides or {})  # stage → fixed answer (bad-input tests)

    def question(self, text: str) -> str:
        m = re.search(r"### Question\n(.*?)\n", text)
        assert m, "every stage prompt quotes the question"
        return m.group(1)

    def __call__(self, stage: str, text: str, body: dict[str, Any]) -> str:
        if stage in self.overrides:
            return self.overrides[stage]
        q = self.question(text)
        gold = self.gold[q]
        if stage == "extract_keywords":
            return json.dumps({"keywords": keywords_of(q)})
        if stage == "select_schema":
            return ", ".join(tables_of(gold))
        if stage == "generate_candidate":
            if body.get("seed", 0) == 0:
                return f"```sql\n{self.wrong or gold}\n```"
            return f"```sql\n{broken(gold)}\n```"
        if stage == "revise":
            return f"The corrected query:\n```sql\n{gold}\n```"
        if stage == "generate_unit_test":
            return f"1. The result answers: {q}\n2. The result is not empty"
        if stage == "evaluate":
            cands = re.findall(r"### Candidate (\d+)\n(.*?)\nResult: ", text, re.S)
            return "\n".join(f"Candidate {i}: {'pass' if sql.strip() == gold else 'fail'}" for i, sql in cands)
        raise AssertionError(f"unexpected stage {stage!r}")
