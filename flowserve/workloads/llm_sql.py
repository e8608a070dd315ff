"""`{kind: llm_sql, table: PATH, query: SQL, optimize: none|all|LIST, seed}`: one SQL
statement with LLM calls as ONE query (its table registered under the file's stem).

The statement runs sandboxed (only its table readable, nothing written) through the
LLM-in-SQL planner with modelled answers
(`flowserve.sql.sim_backend`); its calls — each LLM operator a batch after the previous
one, in the planner's send order — become the query's plan."""

from __future__ import annotations

from pathlib import Path

from flowserve.workloads.base import QuerySpec, Workload


def llm_sql_workload(table: str, query: str, optimize: str, seed: int) -> Workload:
    from flowserve.sql.connection import PAPER_CLUSTER, Connection
    from flowserve.sql.sim_backend import SimClusterBackend

    backend = SimClusterBackend(PAPER_CLUSTER, seed=seed, flush=False)  # the whole plan is the query
    with Connection(backend, optimize, seed=seed) as con:
        con.register(Path(table).stem, table)
        con.sql(query)
    return Workload(f"llm_sql:{Path(table).stem}", (QuerySpec(0, 0.0, backend.plan, cls=backend.query_class),))
