"""LLM-in-SQL statements as the batch work of `bench compare`.

Each statement is one `batch` query (`flowserve.workloads.llm_sql`): the paper's query
types Q1–Q4 (Liu et al. §7.1.2) on the movies table the project ships and on a
generated products table, planned by the LLM-in-SQL planner with every optimisation
(deduplication, column reordering, row sorting), each LLM operator a batch of calls
after the previous one. A job is a sequence of such statements, one every `every_s`
seconds, taking the query types in turn; their plans are built once per (table,
query, rows, seed) and reused.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from flowserve.graph.plan import DagPlan
from flowserve.sql.queries import MOVIES, MOVIES_CSV, PRODUCTS
from flowserve.workloads.base import QuerySpec, Workload

PRODUCT_ROWS = 800  # rows of the generated products table (about as many calls as a movies statement)
STATEMENTS: tuple[tuple[str, str], ...] = tuple(("movies", q) for q in MOVIES) + tuple(("products", q)
                                                                                     for q in PRODUCTS)
SQL_WORKFLOW = "llm_sql"


@lru_cache(maxsize=32)
def statement_plan(table: str, name: str, seed: int) -> DagPlan:
    """The plan of one statement (query type `name` on `table`) with modelled answers."""
    from flowserve.sql.connection import PAPER_CLUSTER, Connection
    from flowserve.sql.generators import products
    from flowserve.sql.sim_backend import SimClusterBackend

    backend = SimClusterBackend(PAPER_CLUSTER, seed=seed, flush=False)  # the whole plan is the query
    with Connection(backend, "all", seed=seed) as con:
        if table == "movies":
            con.register("movies", MOVIES_CSV)
            con.sql(MOVIES[name])
        else:
            con.register("products", products(PRODUCT_ROWS, seed))
            con.sql(PRODUCTS[name])
    plan = backend.plan
    assert isinstance(plan, DagPlan), type(plan)
    return dataclasses.replace(plan, workflow=SQL_WORKFLOW)


def llm_sql_job(statements: int, seed: int, start_s: float = 0.0, every_s: float = 10.0) -> Workload:
    """`statements` LLM-in-SQL statements as batch queries, the first at `start_s`, one every
    `every_s` seconds, the query types in turn (the seed picks where the turn starts)."""
    queries = []
    for i in range(statements):
        table, name = STATEMENTS[(seed + i) % len(STATEMENTS)]
        queries.append(QuerySpec(i, start_s + i * every_s, statement_plan(table, name, seed), cls="batch"))
    return Workload(SQL_WORKFLOW, tuple(queries))


def calls_of(plan: DagPlan) -> int:
    """LLM calls in a statement's plan."""
    return sum(1 for n in plan.nodes if hasattr(n.item, "prompt"))
