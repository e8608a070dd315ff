"""The internal DuckDB functions the rewritten statement calls: vectorised arrow UDFs over
(operator id, list of argument values). Each DuckDB chunk is answered from the executor's
memo; rows the planner did not prefetch run as one batch query per chunk."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
from duckdb.sqltypes import BOOLEAN, DOUBLE, INTEGER, VARCHAR

from flowserve.sql.executor import Executor
from flowserve.sql.statement import ERROR_UDF, UDF

_TYPES = {"__fs_llm_text": (VARCHAR, pa.string()), "__fs_llm_bool": (BOOLEAN, pa.bool_()),
          "__fs_llm_number": (DOUBLE, pa.float64())}


def register(con: duckdb.DuckDBPyConnection, executor: Executor) -> None:
    arg_types = [INTEGER, duckdb.list_type(VARCHAR)]

    def make(arrow_type: pa.DataType, error: bool) -> Any:
        def fn(op_ids: pa.Array, args: pa.Array) -> pa.Array:
            ids = op_ids.to_pylist()
            rows = args.to_pylist()
            out: list[Any] = [None] * len(ids)
            by_op: dict[int, list[int]] = {}
            for i, op in enumerate(ids):
                by_op.setdefault(op, []).append(i)
            for op, pos in by_op.items():
                vals = executor.lookup(op, [rows[i] for i in pos], error=error)
                for i, v in zip(pos, vals, strict=True):
                    out[i] = v
            return pa.array(out, type=arrow_type)
        return fn

    for name, (db_type, arrow_type) in _TYPES.items():
        con.create_function(name, make(arrow_type, False), arg_types, db_type, type="arrow",
                            null_handling="special",
                            side_effects=False)
    con.create_function(ERROR_UDF, make(pa.string(), True), arg_types, VARCHAR, type="arrow",
                        null_handling="special")
    assert set(UDF.values()) <= set(_TYPES)
