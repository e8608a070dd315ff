"""Replay of the real CHESS traces (`flowserve/data/text2sql/`) as text2sql plans."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, QueryPlan, Step
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.text2sql.generator import PromptBuilder, _exec
from flowserve.workloads.text2sql.model import (
    CAND,
    DATABASES,
    EVAL,
    REVISE,
    TRACE_DB,
    TRACE_STEP,
    WORKFLOW,
    Database,
    Text2SQLParams,
)
from flowserve.workloads.text2sql.remaining import expected_remaining, output_priors


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
