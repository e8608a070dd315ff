"""JSON-safe result values and the result-size cap.

Blobs become `{"blob_base64": ...}`, non-finite floats the strings "inf"/"-inf"/"nan",
dates and decimals their ISO/str form, nested lists and structs (DuckDB) recursively.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from flowserve.sqlexec.limits import SQLRefused


def json_safe(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, bytes | bytearray | memoryview):
        return {"blob_base64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, decimal.Decimal):
        return float(v) if v.is_finite() else str(v)
    if isinstance(v, dt.date | dt.time | dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set):
        return [json_safe(x) for x in v]
    return str(v)


def collect(columns: Sequence[str], rows: Iterable[Sequence[Any]], max_rows: int,
            max_bytes: int) -> dict[str, Any]:
    """Up to `max_rows` rows, JSON-safe, within `max_bytes` of JSON; `truncated` says
    whether rows were left out. A single row over the cap is refused, naming the cap."""
    out: list[list[Any]] = []
    size = len(json.dumps(list(columns)))
    truncated = False
    for row in rows:
        if len(out) >= max_rows:
            truncated = True
            break
        safe = [json_safe(v) for v in row]
        n = len(json.dumps(safe)) + 1
        if size + n > max_bytes:
            if not out:
                raise SQLRefused(f"refused: a result row of {n} bytes exceeds the result cap of {max_bytes} bytes")
            truncated = True
            break
        size += n
        out.append(safe)
    return {"columns": list(columns), "rows": out, "truncated": truncated}
