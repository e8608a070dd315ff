"""The agent's stage prompts and how each stage's answer is read.

Every prompt begins with the stage's instructions (a `### Task:` line the scripted test
engine keys on) and, for the schema-reading stages, the database's schema, so all
queries of one database share a long prefix per stage (what prefix-aware routing
exploits). Parsers are total: any text gives a (possibly empty) answer, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from flowserve.graph.prompt import Out

Part = str | Out

KW_TASK = "### Task: extract keywords"
SEL_TASK = "### Task: select schema"
CAND_TASK = "### Task: generate SQL"
REV_TASK = "### Task: revise SQL"
GUT_TASK = "### Task: generate unit tests"
EVAL_TASK = "### Task: evaluate candidates"
TASKS = {KW_TASK: "extract_keywords", SEL_TASK: "select_schema", CAND_TASK: "generate_candidate",
         REV_TASK: "revise", GUT_TASK: "generate_unit_test", EVAL_TASK: "evaluate"}

_FENCE = re.compile(r"```(?:sql|sqlite|duckdb)?\s*(.*?)```", re.S | re.I)
_START = re.compile(r"\b(SELECT|WITH)\b", re.I)


def extract_sql(text: str) -> str:
    """The SQL in a model's answer: a fenced block, else from the first SELECT/WITH up to
    the first semicolon; "" when the answer holds no SQL."""
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip()
    m = _START.search(text)
    if m:
        rest = text[m.start():]
        end = rest.find(";")
        return (rest if end < 0 else rest[: end + 1]).strip()
    return ""


def dialect(kind: str) -> str:
    return "DuckDB" if kind == "duckdb" else "SQLite"


# the keywords answer's JSON schema: engines that support response formats hold the model to it
KEYWORDS_FORMAT = {"type": "json_schema", "json_schema": {"name": "keywords", "schema": {
    "type": "object", "properties": {"keywords": {"type": "array", "items": {"type": "string", "maxLength": 100},
                                                  "maxItems": 20}},
    "required": ["keywords"], "additionalProperties": False}}}


def keywords_prompt(question: str) -> list[Part]:
    return [f"{KW_TASK}\nList the keywords and key phrases of the question: entity names, values, "
            "column-like nouns, conditions. Answer in JSON only: {\"keywords\": [\"...\", ...]}.\n\n"
            f"### Question\n{question}\n\n### Keywords\n"]


def select_prompt(kind: str, schema: str, descriptions: str, question: str, entities: Part,
                  context: Part) -> list[Part]:
    return [f"{SEL_TASK}\nYou are a {dialect(kind)} expert. Choose the tables needed to answer the "
            f"question.\n\n### Database schema\n{schema}\n\n### Column descriptions\n{descriptions}\n\n"
            f"### Question\n{question}\n\n### Values in the database that match the question\n", entities,
            "\n\n### Most related columns\n", context,
            "\n\nAnswer with the table names, comma-separated, or NONE if no table can answer it.\n\n"
            "### Tables\n"]


def candidate_prompt(kind: str, schema: str, question: str, entities: Part) -> list[Part]:
    return [f"{CAND_TASK}\nYou are a {dialect(kind)} expert.\n\n### Database schema\n{schema}\n\n"
            "### Values in the database that match the question\n", entities,
            f"\n\n### Question\n{question}\n\nWrite one {dialect(kind)} query that answers the question. "
            "Answer with the SQL only.\n\n### SQL\n"]


def revise_prompt(kind: str, schema: str, question: str, sql: Part, error: str) -> list[Part]:
    return [f"{REV_TASK}\nYou are a {dialect(kind)} expert.\n\n### Database schema\n{schema}\n\n"
            f"### Question\n{question}\n\n### Failed SQL\n", sql,
            f"\n\n### Error\n{error}\n\nFix the query. Answer with the corrected SQL only.\n\n### Corrected SQL\n"]


def unit_test_prompt(schema: str, question: str, n: int) -> list[Part]:
    return [f"{GUT_TASK}\nWrite up to {n} unit tests that a correct SQL answer to the question must pass "
            f"(what its result must contain, its shape, its ordering), one per line.\n\n"
            f"### Database schema\n{schema}\n\n### Question\n{question}\n\n### Unit tests\n"]


def evaluate_prompt(question: str, test: Part, candidates: Sequence[tuple[int, Part, Part]]) -> list[Part]:
    parts: list[Part] = [f"{EVAL_TASK}\nDecide for each candidate SQL whether its result passes the unit "
                         f"test.\n\n### Question\n{question}\n\n### Unit test\n", test]
    for i, sql, result in candidates:
        parts += [f"\n\n### Candidate {i}\n", sql, "\nResult: ", result]
    parts.append("\n\nAnswer one line per candidate: `Candidate <n>: pass` or `Candidate <n>: fail`.\n\n"
                 "### Verdicts\n")
    return parts


def parse_tables(answer: str, known: Sequence[str]) -> tuple[str, ...]:
    """The known table names the answer mentions (catalog spelling, catalog order)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", answer)}
    return tuple(t for t in known if t.lower() in words)


def parse_unit_tests(answer: str, n: int) -> list[str]:
    tests = []
    for line in answer.splitlines():
        t = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        if t:
            tests.append(t)
    return tests[:n]


def parse_verdicts(answer: str) -> dict[int, bool]:
    """Candidate number → passed, from lines like `Candidate 2: pass`."""
    out: dict[int, bool] = {}
    for m in re.finditer(r"candidate\s*#?\s*(\d+)\s*[:=-]\s*(pass|passed|fail|failed|yes|no)", answer, re.I):
        out.setdefault(int(m.group(1)), m.group(2).lower() in ("pass", "passed", "yes"))
    return out
