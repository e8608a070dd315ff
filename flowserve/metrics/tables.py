"""Reports of experiments: markdown tables, ratios and JSON files (plots: `flowserve.metrics.plots`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):  # an empty cell, however it was computed
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


POLICY_TABLE_LEGEND = (
    "min SLO ×: the smallest SLO scale (deadline = scale × the query's latency alone on the fastest instance) "
    "at which 95% (99%) of the queries meet their deadline, lower is better; throughput: queries per second, "
    "higher is better; mean, p99: query latency in seconds, lower is better; hit rate: share of prompt tokens "
    "served from the prefix cache, higher is better; failed: queries that failed, lower is better; gains: "
    "how many times better than the baseline, above 1 is better; ★: the lowest min SLO × (95%).")


def rank_policies(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Best first: the lowest min SLO scale at 95%, then at 99%, then the lowest mean
    latency; a scale never reached ranks after every reached one."""
    def key(label: str) -> tuple[float, float, float]:
        s = summaries[label]
        m95, m99 = s["min_slo_scale"]["0.95"], s["min_slo_scale"]["0.99"]
        return (math.inf if m95 is None else m95, math.inf if m99 is None else m99, s["latency_s"]["mean"])
    return sorted(summaries, key=key)


def policy_table(summaries: Mapping[str, Mapping[str, Any]], baseline: str | None = None,
                 best: str | None = None) -> str:
    """One row per policy, in the given order; ratios against `baseline` where given; the
    `best` policy's row marked ★."""
    base = summaries.get(baseline) if baseline else None
    headers = ["policy", "min SLO ×(95%)", "min SLO ×(99%)", "throughput q/s", "mean s",
               "p99 s", "hit rate", "failed"]
    if base:
        headers += ["95% gain", "99% gain", "thpt gain"]
    rows = []
    for label, s in summaries.items():
        m95, m99 = s["min_slo_scale"]["0.95"], s["min_slo_scale"]["0.99"]
        row = [f"{label} ★" if label == best else label, m95, m99, s["throughput_qps"], s["latency_s"]["mean"],
               s["latency_s"]["p99"], s["token_hit_rate"], s["failed"]]
        if base:
            row += [ratio(base["min_slo_scale"]["0.95"], m95),
                    ratio(base["min_slo_scale"]["0.99"], m99),
                    ratio(s["throughput_qps"], base["throughput_qps"])]
        rows.append(row)
    return markdown_table(headers, rows)


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=_default))
    return path


def _default(x: Any) -> Any:
    if isinstance(x, np.generic):  # a numpy scalar
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
