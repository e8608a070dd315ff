"""The synthetic CHESS-style Text-to-SQL generator.

A query: information retrieval (4 calls, keyword extraction after the first, sometimes
skipped), candidate generation (≥ 2 in parallel), SQL execution, revise rounds (each
followed by SQL execution) while the SQL errs, up to a cap, then unit tests:
unit_tester, generate_unit_test, unit_tester, evaluate × n (parallel), unit_tester.
That is the call order of the published traces (`flowserve/data/text2sql/`).

Prompt layout: each stage's prompt begins with the stage's instructions and (for the
schema-reading stages) the database schema, shared by all queries of that database; the
rest is the query's own text. Revise rounds of one query and the evaluations of one
query also share a per-query segment.
"""

from __future__ import annotations

import math

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, OpStep, QueryPlan, Segment, Step
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.text2sql.model import (
    CAND,
    DATABASES,
    EVAL,
    EXEC,
    GUT,
    IR,
    KW,
    REVISE,
    TRACES,
    UT,
    WORKFLOW,
    Database,
    StageShape,
    Text2SQLParams,
)
from flowserve.workloads.text2sql.remaining import expected_remaining, output_priors


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
