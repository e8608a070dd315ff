"""A real multi-step workflow: CHESS-style Text-to-SQL over a SQLite database.

One query: `candidates` SQL candidates are generated in parallel and each is executed
on the database (a real `execute_sql` tool op); if none runs, the first is revised with
the database's own error message and executed again, round after round, until it runs
or `max_rounds` revisions were tried. Every prompt begins with the database's schema, so
all queries on one database share a long prefix (what prefix-aware routing exploits).

Request inputs: `question` (required), `database` (a configured name; default the first),
`candidates` and `max_rounds` (capped by the configuration).
Configuration (`gateway.workflows.text2sql`): `databases: {name: path}` (default: the
built-in demo bank), `candidates` (2), `max_rounds` (3), `max_tokens` (128).
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flowserve.apps.base import WorkflowDef
from flowserve.apps.sqlite_demo import create_demo_db
from flowserve.errors import ConfigError, RequestError
from flowserve.graph.nodes import CallEstimate, NodeResult
from flowserve.graph.prompt import Out
from flowserve.graph.workflow import Graph, Workflow

CAND, REVISE, EXEC = "generate_candidate", "revise", "execute_sql"
_FENCE = re.compile(r"```(?:sql|sqlite)?\s*(.*?)```", re.S | re.I)
_START = re.compile(r"\b(SELECT|WITH)\b", re.I)


def extract_sql(text: str) -> str:
    """The SQL in a model's answer: a fenced block, else from the first SELECT/WITH up to
    the first semicolon, else the whole answer."""
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip()
    m = _START.search(text)
    if m:
        rest = text[m.start():]
        end = rest.find(";")
        return (rest if end < 0 else rest[: end + 1]).strip()
    return text.strip()


def read_schema(path: str | Path) -> str:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
                               "ORDER BY name").fetchall()
        finally:
            con.close()
    except sqlite3.Error as e:
        raise ConfigError(f"text2sql: cannot read database {str(path)!r}: {e}") from None
    if not rows:
        raise ConfigError(f"text2sql: database {str(path)!r} has no tables")
    return "\n".join(r[0].strip() + ";" for r in rows)


def header(schema: str) -> str:
    return f"You are a SQLite expert.\n\n### Database schema\n{schema}\n\n"


def candidate_prompt(schema: str, question: str) -> str:
    return (header(schema) + f"### Question\n{question}\n\n"
            "Write one SQLite query that answers the question. Answer with the SQL only.\n\n### SQL\n")


def revise_prompt(schema: str, question: str, sql: str | Out, error: str) -> list[str | Out]:
    return [header(schema) + f"### Question\n{question}\n\n### Failed SQL\n", sql,
            f"\n\n### Error\n{error}\n\nFix the query. Answer with the corrected SQL only.\n\n### Corrected SQL\n"]


class Text2SQL(Workflow):
    name = "text2sql"

    def __init__(self, question: str, db: str, path: str, schema: str, candidates: int,
                 max_rounds: int, max_tokens: int, model: str | None) -> None:
        self.question, self.db, self.path, self.schema = question, db, path, schema
        self.candidates, self.max_rounds, self.max_tokens = candidates, max_rounds, max_tokens
        self.model = model
        self.sql: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.result: dict[str, Any] | None = None
        self.final: str | None = None  # the step whose SQL ran
        self.rounds = 0
        self.llm_calls = 0
        self._cand_left = candidates

    def start(self, g: Graph) -> None:
        for i in range(self.candidates):
            self._llm(g, f"cand{i}", CAND, candidate_prompt(self.schema, self.question),
                      {"temperature": 0.0 if i == 0 else 0.8, "seed": i})

    def _llm(self, g: Graph, key: str, stage: str, prompt: Any, params: dict[str, Any]) -> None:
        self.llm_calls += 1
        g.llm(key, prompt, max_tokens=self.max_tokens, stage=stage, model=self.model, params=params)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        if not key.endswith(".exec"):  # an answer: run its SQL
            self.sql[key] = extract_sql(result.text or "")
            g.tool(f"{key}.exec", "sql", stage=EXEC, database=self.path, sql=self.sql[key])
            return
        step = key.removesuffix(".exec")
        if result.error is None:
            if self.final is None:
                self.final, self.result = step, result.value
        else:
            self.errors[step] = result.error
        if step.startswith("cand"):
            self._cand_left -= 1
            if not self._cand_left and self.final is None:
                self._revise(g, "cand0")
        elif self.final is None and self.rounds < self.max_rounds:
            self._revise(g, step)

    def _revise(self, g: Graph, failed: str) -> None:
        if self.max_rounds == 0:
            return
        self.rounds += 1
        # the failed SQL as text where the answer is known; modelled runs read the answer's tokens
        sql = self.sql.get(failed) or Out(failed)
        self._llm(g, f"rev{self.rounds}", REVISE,
                  revise_prompt(self.schema, self.question, sql, self.errors[failed]), {"temperature": 0.0})

    def expected_remaining(self) -> Sequence[CallEstimate]:
        n_in = len(header(self.schema)) // 4 + 64  # ~4 characters a token
        out = []
        if self.final is None and self.rounds == 0:
            out.append(CallEstimate(CAND, n_in, None, float(self._cand_left)))
        if self.final is None and self.rounds < self.max_rounds:
            out.append(CallEstimate(REVISE, n_in + 64, None, 1.0))
        return out

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        ok = self.final is not None
        last = self.final or (f"rev{self.rounds}" if self.rounds else "cand0")
        out: dict[str, Any] = {
            "status": "ok" if ok else "unresolved", "database": self.db, "sql": self.sql.get(last, ""),
            "revise_rounds": self.rounds, "llm_calls": self.llm_calls,
            "candidates": [self.sql.get(f"cand{i}", "") for i in range(self.candidates)],
        }
        if ok:
            out.update(self.result or {})
        else:
            out["error"] = self.errors.get(last, "no SQL was produced")
        return out


def prepare(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve databases (creating the built-in one) and read their schemas, once."""
    known = {"databases", "candidates", "max_rounds", "max_tokens"}
    extra = sorted(set(settings) - known)
    if extra:
        raise ConfigError(f"gateway.workflows.text2sql: unknown field(s) {extra}; known: {sorted(known)}")
    dbs = dict(settings.get("databases") or {"financial": "builtin"})
    resolved, cleanup = {}, []
    for name, path in dbs.items():
        if path == "builtin":
            tmp = tempfile.mkdtemp(prefix="flowserve-text2sql-")
            cleanup.append(tmp)
            path = str(create_demo_db(Path(tmp) / f"{name}.sqlite"))
        elif not Path(path).is_file():
            raise ConfigError(f"gateway.workflows.text2sql: database {name!r}: no file {path!r}")
        resolved[name] = {"path": str(path), "schema": read_schema(path)}
    out = {"databases": resolved, "candidates": 2, "max_rounds": 3, "max_tokens": 128, "_cleanup": cleanup}
    for key in ("candidates", "max_rounds", "max_tokens"):
        if key in settings:
            out[key] = _int(settings[key], key, 0 if key == "max_rounds" else 1, ConfigError)
    return out


def _int(value: Any, name: str, lo: int, err: type[Exception]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise err(f"text2sql: {name} must be an integer ≥ {lo}, got {value!r}")
    return value


def build(inputs: Mapping[str, Any], settings: Mapping[str, Any], model: str | None) -> Text2SQL:
    question = inputs.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RequestError("text2sql: input 'question' (a non-empty string) is required")
    dbs = settings["databases"]
    db = inputs.get("database", next(iter(dbs)))
    if db not in dbs:
        raise RequestError(f"text2sql: unknown database {db!r}; known: {', '.join(dbs)}")
    cands = min(_int(inputs.get("candidates", settings["candidates"]), "candidates", 1, RequestError),
                settings["candidates"])
    rounds = min(_int(inputs.get("max_rounds", settings["max_rounds"]), "max_rounds", 0, RequestError),
                 settings["max_rounds"])
    return Text2SQL(question.strip(), db, dbs[db]["path"], dbs[db]["schema"], cands, rounds,
                           settings["max_tokens"], model)


TEXT2SQL = WorkflowDef("text2sql", "CHESS-style Text-to-SQL over SQLite: candidates, execution, "
                       "revision by SQL errors", build, prepare)
