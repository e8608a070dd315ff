"""LLM-in-SQL on Spark, for scale-out: the same planner and the same cluster through
`mapInArrow` — each Arrow batch of a partition becomes one planned batch query.

    from flowserve.sql.spark import llm_column
    out = llm_column(df, "Is this for kids? {info} {review}", ["movie_info", "review_content"],
                     "kids", kind="bool", cluster="paper-l4")         # or gateway="http://..."

A row that fails gets NULL and its reason in `<name>_error`. The executors build their
own backend from the plain settings (nothing unpicklable crosses to them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from flowserve.sql.connection import make_backend
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
    if kind not in _SPARK_TYPES:
        raise ValueError(f"kind must be one of {', '.join(_SPARK_TYPES)}")
    tmpl = parse_template(template, len(columns), columns)  # fail on the driver, before any task runs
    spec = choice_spec(choices) if kind == "choice" else OutputSpec(kind)  # type: ignore[arg-type]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        from flowserve.sql.errors import SQLInputError
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
        ex.ops = {0: op}
        for b in batches:
            rows = list(zip(*[[None if v is None else str(v) for v in b.column(col).to_pylist()] for col in cols],
                            strict=True)) if b.num_rows else []
            ex.run_op(0, rows, "spark")
            vals = [ex.memo[(0, r)] for r in rows]
            out = b.append_column(name, pa.array([v for v, _ in vals], type=_ARROW[kind]))
            yield out.append_column(f"{name}_error", pa.array([e for _, e in vals], type=pa.string()))
            ex.memo.clear()
        backend.close()

    return df.mapInArrow(run, schema)
