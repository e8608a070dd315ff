"""`flowserve.sql.connect(cluster=... | gateway=URL)`: a DuckDB connection whose `LLM*()`
functions run on a flowserve cluster through the planner.

    con = flowserve.sql.connect(cluster="paper-l4", optimize="all")
    con.register("movies", "movies_small.csv")
    res = con.sql("SELECT movie_title FROM movies WHERE LLM_FILTER('Is this for kids? {info}', movie_info)")
    res.rows, res.columns, res.report   # report: latency_s, calls, token_hit_rate, errors, ...
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.sql.backend import Backend
from flowserve.sql.cache import ResultCache
from flowserve.sql.errors import SQLInputError
from flowserve.sql.executor import Executor, Stats
from flowserve.sql.ggr import DEFAULT_GGR, GGRConfig
from flowserve.sql.options import Optimizations, parse_optimize
from flowserve.sql.statement import analyse
from flowserve.sql.tables import register_table
from flowserve.sql.udf import register
from flowserve.types.specs import InstanceSpec

if TYPE_CHECKING:
    from flowserve.gateway.settings import GatewaySettings

PAPER_CLUSTER = (InstanceSpec("l4", "L4", "llama-3.1-8b"),)  # Llama-3-8B on one L4, as the paper


def cluster_specs(cluster: str | Sequence[InstanceSpec]) -> tuple[InstanceSpec, ...]:
    if not isinstance(cluster, str):
        return tuple(cluster)
    if cluster == "paper-l4":
        return PAPER_CLUSTER
    return load_cluster(cluster)


def make_backend(cluster: str | Sequence[InstanceSpec] | None = None, gateway: str | None = None,
                 seed: int = 0, model: str | None = None, prefix_caching: bool = True,
                 settings: GatewaySettings | None = None) -> Backend:
    if (cluster is None) == (gateway is None):
        raise SQLInputError("connect(): give exactly one of cluster=... or gateway=URL")
    if gateway is not None:
        from flowserve.sql.gateway_backend import GatewayBackend
        return GatewayBackend(gateway, model)
    try:
        specs = cluster_specs(cluster)  # type: ignore[arg-type]
    except ConfigError as e:
        raise SQLInputError(str(e)) from None
    if all(s.backend == "sim" for s in specs):
        from flowserve.sql.sim_backend import SimClusterBackend
        return SimClusterBackend(specs, seed=seed, prefix_caching=prefix_caching)
    from flowserve.sql.live_backend import LiveClusterBackend
    return LiveClusterBackend(specs, settings, prefix_caching=prefix_caching)


@dataclass
class Result:
    table: pa.Table
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return self.table.column_names

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        cols = [c.to_pylist() for c in self.table.columns]
        return list(zip(*cols, strict=True)) if cols else []


class Connection:
    def __init__(self, backend: Backend, optimize: str | Optimizations = "all", on_error: str = "null",
                 cache: bool | str | None = None, seed: int = 0, max_tokens: int | None = None,
                 ggr: GGRConfig = DEFAULT_GGR, on_progress: Callable[[Stats], None] | None = None) -> None:
        if on_error not in ("null", "fail"):
            raise SQLInputError(f"on_error must be 'null' or 'fail', got {on_error!r}")
        self.backend = backend
        self.opts = parse_optimize(optimize)
        self.on_error = on_error
        self.cache = None if not cache else ResultCache(cache if isinstance(cache, str) else None)
        self.seed = seed
        self.max_tokens = max_tokens
        self.ggr = ggr
        self.on_progress = on_progress
        self.db = duckdb.connect()
        self.executor: Executor | None = None

    def register(self, name: str, source: str | Path | pa.Table) -> None:
        if isinstance(source, pa.Table):
            self.db.register(f"__src_{name}", source)
            self.db.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM "__src_{name}"')
            self.db.unregister(f"__src_{name}")
        else:
            register_table(self.db, name, source)


    def sql(self, query: str) -> Result:
        """Run one statement; LLM operators are planned, run, then the statement itself."""
        t0 = time.perf_counter()
        st = analyse(query, self.max_tokens, self.backend.model, self.opts.predicates,
                     error_column=self.on_error == "null")
        ex = self._executor()
        ex.ops = st.ops
        ex.memo.clear()
        ex.stats = Stats()
        ex.planned = []
        try:
            for pf in st.prefetch:
                rows = [tuple(r[0]) for r in self._fetch(pf.sql)]
                ex.run_op(pf.op_id, rows, f"{st.ops[pf.op_id].fn.lower()}#{pf.op_id}")
            table = self._arrow(st.sql)
        finally:
            ex.memo.clear()
        s = ex.stats
        report = {"statement_wall_s": time.perf_counter() - t0, "rows_planned": s.rows, "calls_sent": s.calls,
                  "result_cache_hits": s.cache_hits, "dedup_saved": s.dedup_saved, "solver_s": s.solver_s,
                  "errors": list(s.errors), "operators": list(s.operators), "optimize": list(self.opts.names)}
        report.update(self.backend.report())
        return Result(table, report)

    def explain(self, query: str) -> list[dict[str, Any]]:
        """Each LLM operator's plan and estimates; no engine is called (answers are modelled)."""
        from flowserve.sql.explain import explain_ops
        from flowserve.sql.sim_backend import SimClusterBackend

        cluster = getattr(self.backend, "cluster", None) or PAPER_CLUSTER
        real, self.backend = self.backend, SimClusterBackend(cluster, seed=self.seed)
        ex = self._executor()
        ex.backend = self.backend
        try:
            self.sql(query)
            return explain_ops(ex.planned, cluster)
        finally:
            self.backend = ex.backend = real

    def _executor(self) -> Executor:
        if self.executor is None:
            ex = Executor(self.backend, self.opts, self.on_error, self.cache, self.seed, self.ggr, self.on_progress)
            register(self.db, ex)
            self.executor = ex
        return self.executor

    def _fetch(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            return self.db.execute(sql).fetchall()
        except duckdb.Error as e:
            raise SQLInputError(_db_message(e)) from None

    def _arrow(self, sql: str) -> pa.Table:
        try:
            return self.db.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            cause = e.__cause__ or e.__context__
            if isinstance(cause, Exception) and not isinstance(cause, duckdb.Error):
                raise cause from None
            raise SQLInputError(_db_message(e)) from None

    def close(self) -> None:
        self.backend.close()
        if self.cache is not None:
            self.cache.close()
        self.db.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _db_message(e: Exception) -> str:
    text = " ".join(str(e).split())
    return text.replace("__fs_llm_text", "LLM").replace("__fs_llm_bool", "LLM_FILTER") \
        .replace("__fs_llm_number", "LLM_NUMBER")[:400]


def connect(cluster: str | Sequence[InstanceSpec] | None = None, gateway: str | None = None, *,
            optimize: str | Optimizations = "all", on_error: str = "null", cache: bool | str | None = None,
            seed: int = 0, model: str | None = None, max_tokens: int | None = None,
            prefix_caching: bool = True, on_progress: Callable[[Stats], None] | None = None,
            tables: dict[str, str] | None = None, settings: GatewaySettings | None = None) -> Connection:
    """`settings`: the in-process live driver's gateway settings (dispatch, tokenizers)."""
    backend = make_backend(cluster, gateway, seed, model, prefix_caching, settings)
    con = Connection(backend, optimize, on_error, cache, seed, max_tokens, on_progress=on_progress)
    for name, path in (tables or {}).items():
        con.register(name, path)
    return con
