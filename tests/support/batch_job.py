"""A synthetic batch job (one LLM call per row) for the simulator's class tests."""

from __future__ import annotations

import numpy as np

from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.workloads.base import QuerySpec, Workload

BATCH_WORKFLOW = "batch_job"


def batch_job(rows: int, seed: int, start_s: float = 0.0, instruction: int = 400, row_tokens: int = 120,
              output: int = 24, span_s: float = 5.0) -> Workload:
    """A small synthetic batch job for tests: one call per row, a shared instruction then
    the row's fields, short answers; the rows are submitted within `span_s` seconds (a
    scan feeding the LLM operator). The benches use real statements (`workloads.sql_jobs`)."""
    rng = np.random.default_rng(seed)
    head = Segment(1, instruction)
    queries = []
    for i in range(rows):
        fields = Segment(1000 + i, max(8, int(rng.normal(row_tokens, row_tokens / 4))))
        out = max(1, int(rng.normal(output, output / 3)))
        plan = QueryPlan(BATCH_WORKFLOW, ((CallStep("llm_row", (head, fields), out),),))
        queries.append(QuerySpec(i, start_s + span_s * i / rows, plan, cls="batch"))
    return Workload(BATCH_WORKFLOW, tuple(queries), output_priors={(BATCH_WORKFLOW, "llm_row"): float(output)})
