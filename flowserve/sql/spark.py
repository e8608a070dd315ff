"""LLM-in-SQL on Spark, for scale-out: the same planner and the same cluster through
`mapInArrow` — each Arrow batch of a partition becomes one planned batch query.

    from flowserve.sql.spark import llm_column
    out = llm_column(df, "Is this for kids? {info} {review}", ["movie_info", "review_content"],
                     "kids", kind="bool", cluster="paper-l4")         # or gateway="http://..."

A row that fails gets NULL and its reason in `<name>_error`. The executors build their
own backend from the plain settings (nothing unpicklable crosses to them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from flowserve.sql.arguments import check_options
from flowserve.sql.connection import make_backend
from flowserve.sql.errors import SQLInputError
from flowserve.sql.executor import Executor
from flowserve.sql.options import parse_optimize
from flowserve.sql.output import OutputSpec, choice_spec
from flowserve.sql.planner import LLMOp
from flowserve.sql.statement import DEFAULT_MAX_TOKENS
from flowserve.sql.templates import parse_template

_SPARK_TYPES = {"text": "string", "bool": "boolean", "number": "double", "choice": "string"}
_ARROW = {"text": pa.string(), "bool": pa.bool_(), "number": pa.float64(), "choice": pa.string()}


def llm_column(df: Any, template: str, columns: Sequence[str], name: str, *, kind: str = "text",
               choices: str | None = None, cluster: str | None = None, gateway: str | None = None,
               optimize: str = "all", max_tokens: int | None = None, seed: int = 0) -> Any:
    """`df` with a column `name` = LLM(template, *columns) and `name_error`."""
    check_options(seed, max_tokens, None, None)
    _driver_python(df.sparkSession)
    if kind not in _SPARK_TYPES:
        raise SQLInputError(f"kind must be one of {', '.join(_SPARK_TYPES)}")
    tmpl = parse_template(template, len(columns), columns)  # fail on the driver, before any task runs
    spec = choice_spec(choices) if kind == "choice" else OutputSpec(kind)  # type: ignore[arg-type]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SQLInputError(f"unknown column(s) {missing}; the DataFrame has {df.columns}")
    op = LLMOp("LLM", tmpl, spec, max_tokens or DEFAULT_MAX_TOKENS[kind])
    cols = list(columns)
    settings = (cluster, gateway, parse_optimize(optimize), seed)
    schema = f"{', '.join(f'`{f.name}` {f.dataType.simpleString()}' for f in df.schema.fields)}, " \
             f"`{name}` {_SPARK_TYPES[kind]}, `{name}_error` string"

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        c, g, opts, sd = settings
        backend = make_backend(c, g, sd)
        ex = Executor(backend, opts, "null", seed=sd)
        ex.begin({0: op})
        for b in batches:
            rows = list(zip(*[[None if v is None else str(v) for v in b.column(col).to_pylist()] for col in cols],
                            strict=True)) if b.num_rows else []
            ex.run_op(0, rows, "spark")
            vals = [ex.value(0, r) for r in rows]
            out = b.append_column(name, pa.array([v for v, _ in vals], type=_ARROW[kind]))
            yield out.append_column(f"{name}_error", pa.array([e for _, e in vals], type=pa.string()))
            ex.memo.clear()
        backend.close()

    return df.mapInArrow(run, schema)


_FUNCTIONS = {"LLM": "text", "LLM_FILTER": "bool", "LLM_NUMBER": "number", "LLM_CHOICE": "choice", "LLM_JSON": "json"}


def register(spark: Any, *, cluster: str | None = None, gateway: str | None = None, optimize: str = "all",
             max_tokens: int | None = None, seed: int = 0, api_key: str | None = None) -> None:
    """Register LLM, LLM_FILTER, LLM_NUMBER, LLM_CHOICE and LLM_JSON for `spark.sql(...)`:
    vectorised (pandas/Arrow) UDFs; each Arrow batch an executor gets is one planned batch
    (the same planner and cluster as `connect()`). A UDF sees values, not column names:
    name the fields with `{placeholders}`, else they are `field 1`, `field 2`, ...
    Executors run this driver's Python (PYSPARK_PYTHON is set to `sys.executable` when unset)."""
    from pyspark.sql.functions import pandas_udf

    check_options(seed, max_tokens, None, None)
    _driver_python(spark)
    make_backend(cluster, gateway, seed).close()  # a bad cluster or URL fails here, on the driver
    settings = (cluster, gateway, parse_optimize(optimize), max_tokens, seed, api_key)

    def udf_for(fn: str, kind: str) -> Any:
        spark_type = {"json": "string"}.get(kind, _SPARK_TYPES.get(kind, "string"))

        def call(*cols: pd.Series) -> pd.Series:
            c, g, opts, mt, sd, key = settings
            lead = 2 if kind in ("choice", "json") else 1
            consts = [_constant(cols[i], fn) for i in range(min(lead, len(cols)))]
            op = _udf_op(fn, kind, consts, len(cols) - lead, mt)
            rows = list(zip(*[[None if v is None or v != v else str(v) for v in s] for s in cols[lead:]],
                            strict=True)) if len(cols) > lead else [()] * len(cols[0])
            backend = make_backend(c, g, sd, api_key=key)
            try:
                ex = Executor(backend, opts, "null", seed=sd)
                ex.begin({0: op})
                ex.run_op(0, rows, "spark-sql")
                return pd.Series([ex.value(0, r)[0] for r in rows], dtype="object")
            finally:
                backend.close()

        return pandas_udf(call, spark_type)  # type: ignore[call-overload]

    for fn, kind in _FUNCTIONS.items():
        spark.udf.register(fn, udf_for(fn, kind))


def _driver_python(spark: Any) -> None:
    """Executors run this Python (and so this flowserve), not whatever `python3` is on PATH."""
    if "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        spark.sparkContext.pythonExec = sys.executable


def _constant(s: Any, fn: str) -> str:
    vals = set(s.dropna().astype(str)) if len(s) else set()
    if len(vals) != 1:
        raise SQLInputError(f"{fn}(): the instruction (and allowed answers or schema) must be a string literal")
    return vals.pop()


def _udf_op(fn: str, kind: str, consts: list[str], n_cols: int, max_tokens: int | None) -> LLMOp:
    from flowserve.sql.output import json_spec

    if len(consts) < (2 if kind in ("choice", "json") else 1):
        raise SQLInputError(f"{fn}(): missing the instruction")
    spec = OutputSpec(kind) if kind not in ("choice", "json") else \
        (choice_spec(consts[0]) if kind == "choice" else json_spec(consts[0]))  # type: ignore[arg-type]
    tmpl = parse_template(consts[-1], n_cols)
    return LLMOp(fn, tmpl, spec, max_tokens or DEFAULT_MAX_TOKENS[kind])
