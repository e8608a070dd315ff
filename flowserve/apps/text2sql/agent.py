"""The CHESS-style Text-to-SQL agent as one workflow (CHESS, Talaei et al. 2024; the
stages of the published traces):

    extract_keywords (LLM) ─┬─ retrieve_entities (tool: MinHash-LSH over the values)
                            └─ retrieve_context (tool: column/table descriptions)
    select_schema (LLM: the tables the question needs; the pruned schema)
    generate_candidate × n (LLM, parallel) → execute_sql (tool, the SQL sandbox)
        → revise (LLM, prompted with the real execution error) → execute_sql … ≤ max_rounds
    generate_unit_test (LLM) → evaluate × tests (LLM, parallel): the candidate that
        passes the most unit tests is the answer

Every stage is a step of the one IR, so the same class runs in the gateway (real text,
real tools) and in the simulator, where answers are modelled lengths (`text` is None):
there the oracle decides which executions fail, the full schema stands in for the pruned
one, `unit_tests` tests are evaluated and the first candidate that ran is chosen.

A query fails with its reason when schema selection finds no table for the question,
when the model answers with no SQL at all, or when no candidate runs within the rounds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowserve.apps.text2sql import prompts as P
from flowserve.apps.text2sql.catalog import Catalog
from flowserve.errors import Unanswerable
from flowserve.graph.nodes import CallEstimate, NodeResult
from flowserve.graph.prompt import Out
from flowserve.graph.workflow import Graph, Workflow

KW, ENT, CTX, SEL = "extract_keywords", "retrieve_entities", "retrieve_context", "select_schema"
CAND, EXEC, REVISE, GUT, EVAL = "generate_candidate", "execute_sql", "revise", "generate_unit_test", "evaluate"
LLM_STAGES = (KW, SEL, CAND, REVISE, GUT, EVAL)
NO_SQL = "the model's answer holds no SQL"


@dataclass(frozen=True)
class AgentConfig:
    candidates: int = 2
    max_rounds: int = 3  # revision rounds per candidate
    unit_tests: int = 3  # 0: no unit tests, the first candidate that runs wins
    max_tokens: int = 256  # SQL answers; the short stages ask for less
    result_rows: int = 5  # rows of a candidate's result quoted to the evaluator

    def __post_init__(self) -> None:
        assert self.candidates >= 1 and self.max_rounds >= 0 and self.unit_tests >= 0, self
        assert self.max_tokens >= 1 and self.result_rows >= 0, self


@dataclass
class _Cand:
    key: str  # the LLM step whose SQL is current
    sql: str | None = None
    rounds: int = 0
    error: str | None = None
    value: Any = None
    ran: bool = False
    score: int = 0

    def answered(self, key: str, sql: str | None) -> None:
        """Its LLM step `key` answered with `sql` (None: modelled, the answer goes on as tokens)."""
        self.key, self.sql = key, sql

    def executed(self, value: Any) -> None:
        self.ran, self.value, self.error = True, value, None

    def failed(self, error: str) -> None:
        self.error = error

    def revise(self) -> int:
        """Another round of revision; its number."""
        self.rounds += 1
        return self.rounds

    def passed(self) -> None:
        """An evaluator judged its result right."""
        self.score += 1


class ChessAgent(Workflow):
    name = "text2sql"

    def __init__(self, question: str, database: str, catalog: Catalog, config: AgentConfig,
                 model: str | None = None) -> None:
        self.question, self.database, self.catalog, self.cfg, self.model = question, database, catalog, config, model
        self.tables: tuple[str, ...] = ()
        self.keywords: str | None = None
        self.cands = [_Cand(f"cand{i}") for i in range(config.candidates)]
        self._open = config.candidates
        self._evals_open = 0
        self.tests: list[str | None] = []
        self.chosen: int | None = None
        self.calls: dict[str, int] = {}

    # ------------------------------------------------------------------ steps

    def _llm(self, g: Graph, key: str, stage: str, prompt: Sequence[Any], max_tokens: int,
             temperature: float = 0.0, seed: int = 0, response_format: dict[str, Any] | None = None) -> None:
        self.calls[stage] = self.calls.get(stage, 0) + 1
        g.llm(key, list(prompt), max_tokens=max_tokens, stage=stage, model=self.model,
              params={"temperature": temperature, "seed": seed}, response_format=response_format)

    def start(self, g: Graph) -> None:
        c = self.catalog
        self._llm(g, "keywords", KW, P.keywords_prompt(self.question), 96, response_format=P.KEYWORDS_FORMAT)
        ent = g.tool("entities", "entity_lookup", stage=ENT, database=c.path, keywords=Out("keywords"))
        ctx = g.tool("context", "column_context", stage=CTX, database=c.path, keywords=Out("keywords"))
        self._llm(g, "schema", SEL, P.select_prompt(c.kind, c.schema(), c.descriptions(), self.question,
                                                    ent.out, ctx.out), 64)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        if key == "keywords":
            self.keywords = result.text
        elif key == "schema":
            self._schema_chosen(g, result.text)
        elif key.startswith("cand"):
            i = int(key[4:].split(".", 1)[0])
            if key.endswith(".exec"):
                self._executed(g, i, result)
            else:
                self._answered(g, i, key, result.text)
        elif key == "unit_tests":
            self._tests_written(g, result.text)
        elif key.startswith("eval"):
            self._evaluated(result.text)

    def _schema_chosen(self, g: Graph, answer: str | None) -> None:
        names = tuple(t.name for t in self.catalog.tables)
        if answer is None:  # modelled run
            self.tables = names
        else:
            self.tables = P.parse_tables(answer, names)
            if not self.tables:
                raise Unanswerable(f"text2sql: no table of database {self.database!r} can answer the question "
                                    f"(schema selection answered {answer.strip()[:120]!r})")
        schema = self.catalog.schema(self.tables)
        for i, cand in enumerate(self.cands):
            self._llm(g, cand.key, CAND, P.candidate_prompt(self.catalog.kind, schema, self.question,
                                                            Out("entities")),
                      self.cfg.max_tokens, 0.0 if i == 0 else 0.8, i)

    def _answered(self, g: Graph, i: int, key: str, answer: str | None) -> None:
        cand = self.cands[i]
        if answer is None:  # modelled: the answer's tokens go to the (modelled) execution
            cand.answered(key, None)
            g.tool(f"{key}.exec", "sql", stage=EXEC, database=self.catalog.path, sql=Out(key))
            return
        cand.answered(key, P.extract_sql(answer))
        if not cand.sql:
            self._failed(g, i, NO_SQL)
            return
        g.tool(f"{key}.exec", "sql", stage=EXEC, database=self.catalog.path, sql=cand.sql)

    def _executed(self, g: Graph, i: int, result: NodeResult) -> None:
        cand = self.cands[i]
        if result.error is None:
            cand.executed(result.value)
            self._settle(g)
        else:
            self._failed(g, i, result.error)

    def _failed(self, g: Graph, i: int, error: str) -> None:
        cand = self.cands[i]
        cand.failed(error)
        if cand.rounds >= self.cfg.max_rounds:
            self._settle(g)
            return
        rounds = cand.revise()
        sql: str | Out = cand.sql if cand.sql is not None else Out(cand.key)
        self._llm(g, f"cand{i}.rev{rounds}", REVISE,
                  P.revise_prompt(self.catalog.kind, self.catalog.schema(self.tables), self.question,
                                  sql or "(no SQL)", error), self.cfg.max_tokens)

    def _settle(self, g: Graph) -> None:
        self._open -= 1
        if self._open:
            return
        ran = [i for i, c in enumerate(self.cands) if c.ran]
        if not ran:
            errors = [c.error for c in self.cands]
            if all(e == NO_SQL for e in errors):
                raise Unanswerable(f"text2sql: {NO_SQL} (after {self.cfg.max_rounds} revision round(s))")
            last = next(e for e in errors if e != NO_SQL)
            raise Unanswerable(f"text2sql: no candidate SQL ran within {self.cfg.max_rounds} revision "
                                f"round(s); last error: {last}")
        values = [json.dumps(self.cands[i].value, sort_keys=True, default=str) for i in ran]
        modelled = any(self.cands[i].value is None for i in ran)
        if len(ran) < 2 or self.cfg.unit_tests == 0 or (not modelled and len(set(values)) == 1):
            self.chosen = ran[0]
            return
        self._llm(g, "unit_tests", GUT, P.unit_test_prompt(self.catalog.schema(self.tables), self.question,
                                                          self.cfg.unit_tests), 200)

    def _tests_written(self, g: Graph, answer: str | None) -> None:
        ran = [i for i, c in enumerate(self.cands) if c.ran]
        n = self.cfg.unit_tests
        self.tests = [None] * n if answer is None else list(P.parse_unit_tests(answer, n))
        if not self.tests:
            self.chosen = ran[0]
            return
        shown = [(i, self.cands[i].sql or Out(self.cands[i].key), self._result_text(i)) for i in ran]
        for j, test in enumerate(self.tests):
            self._llm(g, f"eval{j}", EVAL, P.evaluate_prompt(self.question, test or Out("unit_tests"), shown),
                      16 * len(ran) + 16)
        self._evals_open = len(self.tests)

    def _result_text(self, i: int) -> str | Out:
        v = self.cands[i].value
        if not isinstance(v, Mapping):
            return Out(f"{self.cands[i].key}.exec")
        return json.dumps({"columns": v.get("columns"), "rows": list(v.get("rows", []))[: self.cfg.result_rows]},
                          default=str)

    def _evaluated(self, answer: str | None) -> None:
        for i, passed in P.parse_verdicts(answer or "").items():
            if 0 <= i < len(self.cands) and self.cands[i].ran and passed:
                self.cands[i].passed()
        self._evals_open -= 1
        if not self._evals_open:
            ran = [i for i, c in enumerate(self.cands) if c.ran]
            self.chosen = max(ran, key=lambda i: (self.cands[i].score, -i))

    # ------------------------------------------------------------------ what the scheduler and client see

    def expected_remaining(self) -> Sequence[CallEstimate]:
        n_schema = len(self.catalog.schema()) // 4 + 200
        out: list[CallEstimate] = []
        if not self.tables:
            out.append(CallEstimate(CAND, n_schema, None, float(self.cfg.candidates)))
        if self.chosen is None and not self.tests:
            out.append(CallEstimate(REVISE, n_schema, None, 0.5 * self._open))
            if self.cfg.unit_tests and self.cfg.candidates > 1:
                out.append(CallEstimate(GUT, n_schema, None, 1.0))
                out.append(CallEstimate(EVAL, 400, None, float(self.cfg.unit_tests)))
        return out

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        assert self.chosen is not None, "a finished agent query has chosen a candidate"
        best = self.cands[self.chosen]
        out: dict[str, Any] = {
            "status": "ok", "database": self.database, "sql": best.sql or "", "chosen": self.chosen,
            "tables": list(self.tables), "keywords": self.keywords, "unit_tests": [t for t in self.tests if t],
            "revise_rounds": sum(c.rounds for c in self.cands), "llm_calls": sum(self.calls.values()),
            "calls": dict(self.calls),
            "candidates": [{"sql": c.sql, "ran": c.ran, "error": c.error, "rounds": c.rounds, "score": c.score}
                           for c in self.cands],
        }
        if isinstance(best.value, Mapping):
            out.update(best.value)
        return out
