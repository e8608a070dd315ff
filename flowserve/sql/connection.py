"""`flowserve.sql.connect(cluster=... | gateway=URL)`: a DuckDB connection whose `LLM*()`
functions run on a flowserve cluster through the planner.

    con = flowserve.sql.connect(cluster="paper-l4", optimize="all")
    con.register("movies", "movies_small.csv")
    res = con.sql("SELECT movie_title FROM movies WHERE LLM_FILTER('Is this for kids?', movie_info)")
    res.rows, res.columns, res.report   # report: latency_s, calls, token_hit_rate, errors, ...

The connection is sandboxed unless `external_access=True` (the `flowserve sql` CLI's
local run): statements then read only the registered tables and write nothing.
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
from flowserve.sql.arguments import check_cluster, check_gateway, check_options, check_statement, check_tables
from flowserve.sql.backend import SQLBackend
from flowserve.sql.cache import ResultCache
from flowserve.sql.duck import embedded_connection
from flowserve.sql.engine_model import PAPER_CLUSTER
from flowserve.sql.errors import SQLInputError
from flowserve.sql.executor import Executor, Stats
from flowserve.sql.ggr import DEFAULT_GGR, GGRConfig
from flowserve.sql.options import Optimizations, parse_optimize
from flowserve.sql.statement import Statement, analyse
from flowserve.sql.tables import register_table
from flowserve.sql.udf import register
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import QUERY_CLASSES, QueryClass

if TYPE_CHECKING:
    from flowserve.host.settings import GatewaySettings

PREFETCH_ROWS = 100_000  # rows an operator plans at once



def cluster_specs(cluster: str | Sequence[InstanceSpec]) -> tuple[InstanceSpec, ...]:
    if not isinstance(cluster, str):
        return tuple(cluster)
    if cluster == "paper-l4":
        return PAPER_CLUSTER
    return load_cluster(cluster)


def make_backend(cluster: str | Sequence[InstanceSpec] | None = None, gateway: str | None = None,
                 seed: int = 0, model: str | None = None, prefix_caching: bool = True,
                 settings: GatewaySettings | None = None, api_key: str | None = None,
                 query_class: QueryClass = "batch", chat: bool = False) -> SQLBackend:
    cluster, gateway = check_cluster(cluster), check_gateway(gateway)
    if (cluster is None) == (gateway is None):
        raise SQLInputError("connect(): give exactly one of cluster=... or gateway=URL")
    if query_class not in QUERY_CLASSES:
        raise SQLInputError(f"query_class must be one of {list(QUERY_CLASSES)}, got {query_class!r}")
    if gateway is not None:
        from flowserve.sql.gateway_backend import GatewayBackend
        return GatewayBackend(gateway, model, api_key=api_key, query_class=query_class, chat=chat)
    try:
        specs = cluster_specs(cluster)  # type: ignore[arg-type]
    except ConfigError as e:
        raise SQLInputError(str(e)) from None
    if not specs:
        raise SQLInputError("connect(): the cluster has no instances")
    if all(s.backend == "sim" for s in specs):
        from flowserve.sql.sim_backend import SimClusterBackend
        return SimClusterBackend(specs, seed=seed, prefix_caching=prefix_caching, query_class=query_class)
    from flowserve.sql.live_backend import LiveClusterBackend
    return LiveClusterBackend(specs, settings, prefix_caching=prefix_caching, query_class=query_class, chat=chat)


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
    def __init__(self, backend: SQLBackend, optimize: str | Optimizations = "all", on_error: str = "null",
                 cache: bool | str | None = None, seed: int = 0, max_tokens: int | None = None,
                 ggr: GGRConfig = DEFAULT_GGR, on_progress: Callable[[Stats], None] | None = None,
                 external_access: bool = False) -> None:
        if on_error not in ("null", "fail"):
            raise SQLInputError(f"on_error must be 'null' or 'fail', got {on_error!r}")
        check_options(seed, max_tokens, on_progress, cache)
        self.backend = backend
        self.opts = parse_optimize(optimize)
        self.on_error = on_error
        self.cache = None if not cache else ResultCache(str(cache) if not isinstance(cache, bool) else None)
        self.seed = seed
        self.max_tokens = max_tokens
        self.ggr = ggr
        self.on_progress = on_progress
        self.external_access = external_access
        self.db = embedded_connection(external_access)
        self.executor: Executor | None = None

    def register(self, name: str, source: str | Path | pa.Table) -> None:
        """A table for statements: a CSV (UTF-8) or Parquet path, or an Arrow table."""
        register_table(self.db, name, source)

    def sql(self, query: str) -> Result:
        """Run one statement; LLM operators are planned, run, then the statement itself."""
        t0 = time.perf_counter()
        st = self._analyse(query)
        ex = self._start(st)
        try:
            self._prefetch(st, ex)
            table = self._arrow(st.sql)
        finally:
            ex.memo.clear()
        s = ex.stats
        report = {"statement_wall_s": time.perf_counter() - t0, "rows_planned": s.rows, "calls_sent": s.calls,
                  "result_cache_hits": s.cache_hits, "dedup_saved": s.dedup_saved, "solver_s": s.solver_s,
                  "rows_failed": s.errors.rows, "errors": s.errors.report(), "operators": list(s.operators),
                  "optimize": list(self.opts.names)}
        report.update(self.backend.report())
        return Result(table, report)

    def explain(self, query: str) -> list[dict[str, Any]]:
        """Each LLM operator's candidate plans and the one chosen, with their estimates.

        The statement itself never runs: only the queries that feed its top-level LLM
        operators do (SELECTs the planner derives), with earlier LLM filters answered by
        the modelled answers of a simulated copy of the cluster; no engine is called."""
        from flowserve.sql.explain import explain_ops
        from flowserve.sql.sim_backend import SimClusterBackend

        st = self._analyse(query)
        if not st.is_query:
            raise SQLInputError(f"explain: only a query (SELECT) can be explained, this is a {st.kind.upper()} "
                                f"statement; nothing was run")
        cluster = self.backend.cluster or PAPER_CLUSTER
        ex = self._start(st)
        try:
            with ex.using(SimClusterBackend(cluster, seed=self.seed)):
                self._prefetch(st, ex)
        finally:
            ex.memo.clear()
        planned_ids = {p.op_id for p in st.prefetch}
        return explain_ops(ex.planned, [op for i, op in st.ops.items() if i not in planned_ids],
                           sum(s.tp for s in cluster))

    def _analyse(self, query: str) -> Statement:
        return analyse(check_statement(query), self.max_tokens, self.backend.model, self.opts.predicates,
                       error_column=self.on_error == "null")

    def _start(self, st: Statement) -> Executor:
        if self.executor is None:
            self.executor = Executor(self.backend, self.opts, self.on_error, self.cache, self.seed, self.ggr,
                                     self.on_progress)
            register(self.db, self.executor)
        ex = self.executor
        ex.backend.begin_statement()
        ex.begin(st.ops)
        return ex

    def _prefetch(self, st: Statement, ex: Executor) -> None:
        """Each top-level operator's rows, planned and run PREFETCH_ROWS at a time (memory
        stays bounded on 10⁶ rows; a later chunk reuses earlier answers for equal rows)."""
        for pf in st.prefetch:
            stage = f"{st.ops[pf.op_id].fn.lower()}#{pf.op_id}"
            try:
                cur = self.db.execute(pf.sql)
                while chunk := cur.fetchmany(PREFETCH_ROWS):
                    ex.run_op(pf.op_id, [tuple(r[0]) for r in chunk], stage)
            except duckdb.Error as e:
                raise SQLInputError(_db_message(e)) from None
            if pf.clause == "where":
                ex.closed.add(pf.op_id)

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
            tables: dict[str, str | Path | pa.Table] | None = None, settings: GatewaySettings | None = None,
            api_key: str | None = None, query_class: QueryClass = "batch",
            external_access: bool = False, chat: bool = False) -> Connection:
    """`settings`: the in-process live driver's gateway settings (dispatch, tokenizers).
    `api_key`: the gateway's key (sent as `Authorization: Bearer`). `query_class`: LLM-in-SQL
    is `batch` work (no SLO; it fills idle capacity) unless `interactive` is asked for.
    `external_access=True` lets statements read and write files (the user's own local run).
    `chat=True` sends each row's prompt as one user message, rendered with the model's chat
    template (instruct models answer plain completion prompts poorly); the simulator models
    lengths either way."""
    check_options(seed, max_tokens, on_progress, cache)
    tables = check_tables(tables)
    optimize = parse_optimize(optimize)
    if on_error not in ("null", "fail"):
        raise SQLInputError(f"on_error must be 'null' or 'fail', got {on_error!r}")
    if not isinstance(chat, bool):
        raise SQLInputError(f"chat must be true or false, got {type(chat).__name__}")
    backend = make_backend(cluster, gateway, seed, model, prefix_caching, settings, api_key, query_class, chat)
    con = Connection(backend, optimize, on_error, cache, seed, max_tokens, on_progress=on_progress,
                     external_access=external_access)
    try:
        for name, path in tables.items():
            con.register(name, path)
    except BaseException:
        con.close()
        raise
    return con
