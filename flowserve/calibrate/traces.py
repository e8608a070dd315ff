"""How close the synthetic text2sql generator is to the real CHESS traces.

For each database the generator is compared with the paper's trace of it (financial ↔
chess-trace1, formula1 ↔ chess-trace2): calls per query, revise rounds, and per stage
the input and output lengths — means and the two-sample Kolmogorov–Smirnov statistic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import ks_2samp

from flowserve.metrics.tables import markdown_table
from flowserve.workloads import text2sql
from flowserve.workloads.agent_trace import read_agent_trace

PAIRS = (("financial", "chess-trace1"), ("formula1", "chess-trace2"))


def _by_stage(queries: Sequence[Sequence[tuple[str, int, int]]]) -> dict[str, tuple[list[int], list[int]]]:
    """Per stage (step), the input and the output lengths of its calls."""
    per_stage: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for calls in queries:
        for stage, n_in, n_out in calls:
            per_stage[stage][0].append(n_in)
            per_stage[stage][1].append(n_out)
    return per_stage


def _profile(queries: list[list[tuple[str, int, int]]]) -> dict[str, Any]:
    return {
        "calls": [len(c) for c in queries],
        "revise": [sum(1 for s, _, _ in c if s == text2sql.REVISE) for c in queries],
        "stages": _by_stage(queries),
    }


def _compare(a: list[int], b: list[int]) -> dict[str, float]:
    ma, mb = float(np.mean(a)), float(np.mean(b))
    return {"synthetic_mean": ma, "trace_mean": mb, "rel_err": (ma - mb) / mb,
            "ks": float(ks_2samp(a, b).statistic)}


def calibration_report(n: int = 2000, seed: int = 0) -> tuple[dict[str, Any], str]:
    report: dict[str, Any] = {}
    rows = []
    for db, trace in PAIRS:
        real, _ = text2sql.load_trace_file(trace)
        wl = text2sql.synthetic(db, 1.0, n, seed)
        synth = [[(c.stage, c.input_tokens, c.output_tokens) for c in q.plan.calls()]
                 for q in wl.queries]
        pr, ps = _profile(real), _profile(synth)
        entry = {"calls_per_query": _compare(ps["calls"], pr["calls"]),
                 "revise_rounds": _compare(ps["revise"], pr["revise"]), "stages": {}}
        rows.append([db, "calls/query", *_row(entry["calls_per_query"])])
        rows.append([db, "revise rounds", *_row(entry["revise_rounds"])])
        for stage in text2sql.STAGES:
            if stage not in pr["stages"]:
                continue
            si, so = ps["stages"][stage]
            ri, ro = pr["stages"][stage]
            entry["stages"][stage] = {"input": _compare(si, ri), "output": _compare(so, ro)}
            rows.append([db, f"{stage} input", *_row(entry["stages"][stage]["input"])])
            rows.append([db, f"{stage} output", *_row(entry["stages"][stage]["output"])])
        report[f"{db} vs {trace}"] = entry
    table = markdown_table(["database", "quantity", "synthetic mean", "trace mean",
                            "rel. error", "KS"], rows)
    return report, table


def _row(c: dict[str, float]) -> list[float]:
    return [c["synthetic_mean"], c["trace_mean"], c["rel_err"], c["ks"]]


def _stats(xs: list[int]) -> dict[str, float]:
    a = np.asarray(xs, dtype=float)
    return {"mean": float(a.mean()), "p50": float(np.median(a)), "p99": float(np.percentile(a, 99)),
            "min": float(a.min()), "max": float(a.max())}


def trace_statistics(file: str) -> tuple[dict[str, Any], str]:
    """Any agent trace's statistics: calls per query, and per step its count per query and
    its input and output lengths."""
    trace = read_agent_trace(file)
    per_step = _by_stage(trace.queries)
    report: dict[str, Any] = {"trace": file, "queries": len(trace.queries),
                              "calls_per_query": _stats([len(q) for q in trace.queries]), "steps": {}}
    rows = []
    for step in trace.steps():
        ins, outs = per_step[step]
        counts = [sum(1 for c in q if c[0] == step) for q in trace.queries]
        entry = {"calls": len(ins), "per_query": _stats(counts), "input": _stats(ins), "output": _stats(outs)}
        report["steps"][step] = entry
        rows.append([step, len(ins), entry["per_query"]["mean"], entry["per_query"]["max"],
                     entry["input"]["mean"], entry["input"]["p99"], entry["output"]["mean"], entry["output"]["p99"]])
    c = report["calls_per_query"]
    head = (f"{file}: {len(trace.queries)} queries, calls per query min/mean/max "
            f"{c['min']:.0f} / {c['mean']:.1f} / {c['max']:.0f}\n\n")
    table = markdown_table(["step", "calls", "per query (mean)", "per query (max)", "input mean", "input p99",
                            "output mean", "output p99"], rows)
    return report, head + table
