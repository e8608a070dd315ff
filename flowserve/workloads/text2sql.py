"""CHESS-style Text-to-SQL: synthetic generator, replay of the real traces, and the
expected-remaining-work model the scheduler uses for it.

A query: information retrieval (4 calls, keyword extraction after the first, sometimes
skipped), candidate generation (≥ 2 in parallel), SQL execution, revise rounds (each
followed by SQL execution) while the SQL errs, up to a cap, then unit tests:
unit_tester, generate_unit_test, unit_tester, evaluate × n (parallel), unit_tester.
That is the call order of the published traces (`flowserve/data/text2sql/`).

Prompt layout: each stage's prompt begins with the stage's instructions and (for the
schema-reading stages) the database schema, shared by all queries of that database; the
rest is the query's own text. Revise rounds of one query and the evaluations of one
query also share a per-query segment. Per-database lengths are the traces' means
(Trace 1 = financial, Trace 2 = formula1), spread log-normally with the traces' spread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.nodes import CallEstimate
from flowserve.graph.plan import CallStep, OpStep, QueryPlan, Segment, Step
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

WORKFLOW = "text2sql"
IR, KW, CAND, REVISE = "information_retriever", "extract_keywords", "generate_candidate", "revise"
UT, GUT, EVAL = "unit_tester", "generate_unit_test", "evaluate"
STAGES = (IR, KW, CAND, REVISE, UT, GUT, EVAL)
EXEC = "execute_sql"
# Hexgen's four stages (its Table 1): schema linking, candidates, self-correction, evaluation.
PAPER_STAGE = {IR: "schema_linking", KW: "schema_linking", CAND: "sql_candidates",
               REVISE: "self_correction", UT: "evaluation", GUT: "evaluation", EVAL: "evaluation"}
TRACE_STEP = {"Information Retriever": IR, "extract_keywords": KW, "revise": REVISE,
              "unit_tester": UT, "generate_unit_test": GUT, "evaluate": EVAL}

# SPEC §4 means (Llama-3.1-70B on BIRD mini-dev): priors for output-length prediction.
SPEC_MEANS = {IR: (308, 5), KW: (667, 45), CAND: (11748, 678), REVISE: (5963, 79),
              UT: (275, 4), GUT: (1109, 103), EVAL: (961, 22)}


@dataclass(frozen=True)
class StageShape:
    input_mean: float
    input_sd_log: float
    output_mean: float
    output_sd_log: float
    shared: int  # tokens of the (stage, database) prefix shared by all queries


@dataclass(frozen=True)
class Database:
    name: str
    stages: Mapping[str, StageShape]
    error_prob: float  # P(SQL errs again) per revise round: capped-geometric rounds
    keyword_prob: float  # P(keyword extraction runs)
    eval_counts: Mapping[int, float]  # distribution of parallel evaluations


def _shape(i: float, isd: float, o: float, osd: float, shared: int) -> StageShape:
    return StageShape(i, isd, o, osd, shared)


# Fitted to chess-trace1.json (financial) and chess-trace2.json (formula1); the error
# probabilities solve E[min(Geometric, 10)] = 3.73 and 4.38 revise rounds.
DATABASES: dict[str, Database] = {
    "financial": Database(
        "financial",
        {IR: _shape(306, 0.01, 7, 0.55, 290), KW: _shape(669, 0.03, 44, 0.36, 630),
         CAND: _shape(10000, 0.20, 680, 0.30, 7000), REVISE: _shape(5954, 0.04, 82, 0.61, 5600),
         UT: _shape(275, 0.01, 5, 0.19, 265), GUT: _shape(1110, 0.12, 102, 0.34, 700),
         EVAL: _shape(960, 0.13, 29, 0.43, 600)},
        error_prob=0.8092, keyword_prob=0.67,
        eval_counts={0: 4, 3: 10, 4: 8, 5: 30, 6: 38},
    ),
    "formula1": Database(
        "formula1",
        {IR: _shape(306, 0.01, 8, 0.61, 290), KW: _shape(696, 0.03, 61, 0.37, 630),
         CAND: _shape(11947, 0.16, 741, 0.31, 9000), REVISE: _shape(7993, 0.04, 122, 0.86, 7500),
         UT: _shape(275, 0.01, 5, 0.19, 265), GUT: _shape(1286, 0.16, 101, 0.50, 750),
         EVAL: _shape(1268, 0.24, 31, 0.49, 600)},
        error_prob=0.8422, keyword_prob=0.92,
        eval_counts={4: 36, 5: 22, 6: 30, 8: 2, 11: 6},
    ),
}
TRACES = {"financial": ("financial",), "formula1": ("formula1",), "mixed": ("financial", "formula1")}
TRACE_DB = {"chess-trace1": "financial", "chess-financial": "financial",
            "chess-trace2": "formula1", "chess-formula1": "formula1"}


@dataclass(frozen=True)
class Text2SQLParams:
    candidates: int = 2
    max_rounds: int = 10
    exec_mean_s: float = 0.3  # SQL execution time (log-normal, sd_log 0.5)
    error_prob: float | None = None  # override every database's


def capped_rounds_mean(p: float, cap: int) -> float:
    """E[min(G, cap)] for P(G ≥ k) = p^k: Σ_{k=1..cap} p^k."""
    return p * (1 - p**cap) / (1 - p) if p < 1 else float(cap)


def tail_sd_log(shape: StageShape) -> float:
    """Spread of the non-shared part of a prompt so the whole prompt keeps the traces' spread:
    a log-normal's sd is mean·√(e^{s²}−1), and all the variance sits in the tail."""
    sd = shape.input_mean * math.sqrt(math.exp(shape.input_sd_log**2) - 1)
    tail = shape.input_mean - shape.shared
    return math.sqrt(math.log(1 + (sd / tail) ** 2))


def _lognormal(rng: np.random.Generator, mean: float, sd_log: float) -> int:
    """Log-normal draw with the given mean (not median)."""
    mu = math.log(mean) - sd_log**2 / 2
    return max(1, round(float(rng.lognormal(mu, sd_log))))


class PromptBuilder:
    """Builds prompts with the shared-prefix layout described in the module docstring."""

    def __init__(self, ids: SegmentIds) -> None:
        self.ids = ids

    def prompt(self, db: Database, stage: str, length: int,
               query_seg: tuple[int, int] | None = None) -> tuple[Segment, ...]:
        shared = min(db.stages[stage].shared, length - 1)
        segs = []
        if shared > 0:  # a shorter prompt keeps a prefix of the shared segment
            segs.append(Segment(self.ids.shared(f"{stage}/{db.name}"), shared))
        rest = length - shared
        if query_seg is not None and rest > 1:
            qid, qlen = query_seg
            take = min(qlen, rest - 1)
            segs.append(Segment(qid, take))
            rest -= take
        segs.append(Segment(self.ids.unique(), rest))
        return tuple(segs)


def _exec(rng: np.random.Generator, params: Text2SQLParams, error: bool) -> OpStep:
    return OpStep(EXEC, "sql", _lognormal_s(rng, params.exec_mean_s), error)


def _lognormal_s(rng: np.random.Generator, mean: float) -> float:
    mu = math.log(mean) - 0.125
    return float(rng.lognormal(mu, 0.5))


def generate_plan(rng: np.random.Generator, db: Database, params: Text2SQLParams,
                  prompts: PromptBuilder) -> QueryPlan:
    def call(stage: str, query_seg: tuple[int, int] | None = None) -> CallStep:
        shape = db.stages[stage]
        n_in = shape.shared + _lognormal(rng, shape.input_mean - shape.shared, tail_sd_log(shape))
        n_out = _lognormal(rng, shape.output_mean, shape.output_sd_log)
        return CallStep(stage, prompts.prompt(db, stage, n_in, query_seg), n_out)

    steps: list[Step] = [(call(IR),)]
    if rng.random() < db.keyword_prob:
        steps.append((call(KW),))
    steps += [(call(IR),), (call(IR),), (call(IR),)]
    steps.append(tuple(call(CAND) for _ in range(params.candidates)))
    p = db.error_prob if params.error_prob is None else params.error_prob
    rounds = 0
    while rounds < params.max_rounds and rng.random() < p:
        rounds += 1
    steps.append((_exec(rng, params, rounds > 0),))
    revise_seg = (prompts.ids.unique(), 200)
    for r in range(rounds):
        steps.append((call(REVISE, revise_seg),))
        steps.append((_exec(rng, params, r + 1 < rounds),))
    counts, weights = zip(*db.eval_counts.items(), strict=True)
    n_eval = int(rng.choice(counts, p=np.array(weights) / sum(weights)))
    if n_eval == 0:
        steps += [(call(UT),), (call(UT),), (call(UT),)]
    else:
        eval_seg = (prompts.ids.unique(), 300)
        steps += [(call(UT),), (call(GUT),), (call(UT),)]
        steps.append(tuple(call(EVAL, eval_seg) for _ in range(n_eval)))
        steps.append((call(UT),))
    return QueryPlan(WORKFLOW, tuple(steps),
                     {"db": db.name, "error_prob": p, "max_rounds": params.max_rounds,
                      "candidates": params.candidates})


# --------------------------------------------------------------------------- expectations


def expected_remaining(issued: Mapping[str, int], attrs: Mapping[str, object]) -> list[CallEstimate]:
    """Calls a text2sql query is still expected to make, from what it has issued so far.

    Known structure: 4 IR, keyword extraction (with its probability), the candidates,
    revise rounds (memoryless: Σ_{k=1..cap−r} p^k more after r), 3 unit_tester calls,
    and unit-test generation + evaluations with the database's mean count.
    """
    db = DATABASES[str(attrs.get("db", "financial"))]
    p = float(attrs.get("error_prob", db.error_prob))  # type: ignore[arg-type]
    cap = int(attrs.get("max_rounds", 10))  # type: ignore[call-overload]
    n_cand = int(attrs.get("candidates", 2))  # type: ignore[call-overload]
    weights = db.eval_counts
    total_w = sum(weights.values())
    eval_mean = sum(k * w for k, w in weights.items()) / total_w
    p_tests = 1 - weights.get(0, 0) / total_w
    after_revise = issued.get(UT, 0) > 0
    if issued.get(CAND, 0) == 0:
        rounds_left = capped_rounds_mean(p, cap)
    elif after_revise:
        rounds_left = 0.0
    else:
        r = issued.get(REVISE, 0)
        rounds_left = capped_rounds_mean(p, cap - r) if r < cap else 0.0
    expected = {
        IR: 4.0,
        KW: db.keyword_prob if issued.get(IR, 0) <= 1 else float(issued.get(KW, 0)),
        CAND: float(n_cand),
        REVISE: issued.get(REVISE, 0) + rounds_left,
        UT: 3.0,
        GUT: p_tests,
        EVAL: p_tests * eval_mean if not issued.get(EVAL) else float(issued[EVAL]),
    }
    out = []
    for stage in STAGES:
        left = expected[stage] - issued.get(stage, 0)
        if left > 1e-9:
            out.append(CallEstimate(stage, round(db.stages[stage].input_mean), None, left))
    return out


def output_priors() -> dict[tuple[str, str], float]:
    return {(WORKFLOW, s): float(o) for s, (_, o) in SPEC_MEANS.items()}


# --------------------------------------------------------------------------- workloads


def synthetic(trace: str, rate: float, queries: int, seed: int, arrival: str = "poisson",
              cv: float | None = None, params: Text2SQLParams | None = None) -> Workload:
    if trace not in TRACES:
        raise ConfigError(f"unknown text2sql trace {trace!r}; known: {', '.join(TRACES)}")
    if queries <= 0:
        raise ConfigError(f"queries must be positive, got {queries}")
    params = params or Text2SQLParams()
    if params.candidates < 2:
        raise ConfigError(f"text2sql needs at least 2 candidates, got {params.candidates}")
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, queries, rate, arrival, cv)
    prompts = PromptBuilder(SegmentIds())
    dbs = [DATABASES[name] for name in TRACES[trace]]
    specs = []
    for i, t in enumerate(times):
        db = dbs[int(rng.integers(len(dbs)))] if len(dbs) > 1 else dbs[0]
        specs.append(QuerySpec(i, float(t), generate_plan(rng, db, params, prompts)))
    return Workload(f"text2sql-{trace}", tuple(specs), {WORKFLOW: expected_remaining},
                    output_priors())


def load_trace_file(file: str) -> tuple[list[list[tuple[str, int, int]]], str]:
    """Read a CHESS trace: per query, its calls (stage, input, output) in file order."""
    trace = read_agent_trace(file)
    queries = []
    for calls in trace.queries:
        mapped = []
        for step, n_in, n_out in calls:
            stage = CAND if step.startswith("generate_candidate") else TRACE_STEP.get(step)
            if stage is None:
                raise ConfigError(f"trace {file!r}: step {step!r} is not a CHESS step "
                                  f"(replay it with kind: agent_trace)")
            mapped.append((stage, n_in, n_out))
        queries.append(mapped)
    db = TRACE_DB.get(file, "formula1" if "formula1" in file or "trace2" in file else "financial")
    return queries, db


def trace_plan(calls: Sequence[tuple[str, int, int]], db: Database, rng: np.random.Generator,
               params: Text2SQLParams, prompts: PromptBuilder) -> QueryPlan:
    """Calls in file order; adjacent candidates / evaluations form one parallel step; SQL
    execution after the candidates and after each revise round, as in the generator."""
    steps: list[Step] = []
    revise_seg = (prompts.ids.unique(), 200)
    eval_seg = (prompts.ids.unique(), 300)
    rounds = sum(1 for c in calls if c[0] == REVISE)
    done_rounds = 0
    for i, (stage, n_in, n_out) in enumerate(calls):
        seg = revise_seg if stage == REVISE else eval_seg if stage == EVAL else None
        item = CallStep(stage, prompts.prompt(db, stage, max(n_in, 2), seg), max(n_out, 1))
        if steps and stage in (CAND, EVAL) and i > 0 and calls[i - 1][0] == stage:
            steps[-1] = (*steps[-1], item)
        else:
            steps.append((item,))
        nxt = calls[i + 1][0] if i + 1 < len(calls) else None
        if stage == CAND and nxt != CAND:
            steps.append((_exec(rng, params, rounds > 0),))
        elif stage == REVISE:
            done_rounds += 1
            steps.append((_exec(rng, params, done_rounds < rounds),))
    return QueryPlan(WORKFLOW, tuple(steps),
                     {"db": db.name, "error_prob": db.error_prob, "max_rounds": params.max_rounds,
                      "candidates": sum(1 for c in calls if c[0] == CAND) or 2})


def chess_trace(file: str, rate: float, queries: int | None, seed: int,
                arrival: str = "poisson", cv: float | None = None,
                params: Text2SQLParams | None = None) -> Workload:
    recorded, db_name = load_trace_file(file)
    n = len(recorded) if queries is None else queries
    if n <= 0:
        raise ConfigError(f"queries must be positive, got {n}")
    params = params or Text2SQLParams()
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, n, rate, arrival, cv)
    prompts = PromptBuilder(SegmentIds())
    db = DATABASES[db_name]
    specs = [QuerySpec(i, float(t), trace_plan(recorded[i % len(recorded)], db, rng, params, prompts))
             for i, t in enumerate(times)]
    return Workload(f"chess-trace:{Path(file).stem}", tuple(specs), {WORKFLOW: expected_remaining},
                    output_priors())

