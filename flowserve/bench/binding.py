"""Late vs ready-time binding, side by side on the Hexgen and Preble workloads.

Binding time is a declared property of a dispatch policy (`Dispatch.binding`); every
policy also takes a `binding` parameter. Here each policy runs twice on the same
workload and seed, once per binding: min SLO scale @95/@99 and mean latency on
text2sql (Hexgen's setting), mean and p99 request latency and hit rate on Preble's
kinds. Simulated (virtual time), so the ratios do not depend on the machine's load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from flowserve.bench.preble import PrebleCase, run_case
from flowserve.config import load_cluster
from flowserve.metrics.tables import markdown_table, ratio, write_json
from flowserve.sim.evaluate import evaluate
from flowserve.sim.run import PolicySpec
from flowserve.workloads import load_workload

HEXGEN_POLICIES = {"hexgen_wb+urgency": PolicySpec("hexgen_wb", "urgency"),
                   "least_load+urgency": PolicySpec("least_load", "urgency")}
PREBLE_POLICIES = {"preble_e2+prefix_groups": PolicySpec("preble_e2", "prefix_groups"),
                   "prefix_affinity+fcfs": PolicySpec("prefix_affinity")}
PREBLE_CASES = (("preble-a6000", "tool_use", 40.0), ("preble-a6000", "video_qa", 3.0),
                ("preble-h100", "long_doc_qa", 9.0))


def with_binding(p: PolicySpec, binding: str) -> PolicySpec:
    return replace(p, dispatch_params={**p.dispatch_params, "binding": binding})


def hexgen_rows(queries: int, scales: Sequence[float]) -> list[dict[str, Any]]:
    cluster = load_cluster("hetero-1")
    wl = load_workload("text2sql", {"queries": queries, "rate": 1.0, "seed": 0})
    rows = []
    for label, policy in HEXGEN_POLICIES.items():
        got = {b: evaluate(cluster, wl, with_binding(policy, b), scales)[0] for b in ("ready", "late")}
        rows.append({"workload": "text2sql on hetero-1", "policy": label,
                     **{f"{b}_{k}": got[b]["min_slo_scale"][k] for b in got for k in ("0.95", "0.99")},
                     **{f"{b}_mean_s": got[b]["latency_s"]["mean"] for b in got}})
    return rows


def preble_rows(queries: int) -> list[dict[str, Any]]:
    rows = []
    for cluster, kind, rate in PREBLE_CASES:
        case = PrebleCase(cluster, kind, rate, queries)
        policies = {f"{label}|{b}": with_binding(p, b) for label, p in PREBLE_POLICIES.items()
                    for b in ("ready", "late")}
        runs = run_case(case, {"round_robin": PolicySpec(), **policies})["runs"]
        for label in PREBLE_POLICIES:
            r, lt = runs[f"{label}|ready"], runs[f"{label}|late"]
            rows.append({"workload": f"{kind} on {cluster}", "policy": label,
                         "ready_mean_s": r["latency_mean_s"], "late_mean_s": lt["latency_mean_s"],
                         "ready_p99_s": r["latency_p99_s"], "late_p99_s": lt["latency_p99_s"],
                         "ready_hit": r["token_hit_rate"], "late_hit": lt["token_hit_rate"]})
    return rows


def run_binding_bench(out: Path, quick: bool, console: Console) -> dict[str, Any]:
    scales = (1, 2, 3, 5, 8, 12, 20, 40, 100) if quick else (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 40, 100)
    hx = hexgen_rows(60 if quick else 150, scales)
    console.print(markdown_table(
        ["workload", "policy", "min SLO @95 ready", "late", "min SLO @99 ready", "late",
         "mean s ready", "late", "late gain (mean)"],
        [[r["workload"], r["policy"], r["ready_0.95"], r["late_0.95"], r["ready_0.99"], r["late_0.99"],
          r["ready_mean_s"], r["late_mean_s"], ratio(r["ready_mean_s"], r["late_mean_s"])] for r in hx]),
        highlight=False)
    pb = preble_rows(300 if quick else 1200)
    console.print(markdown_table(
        ["workload", "policy", "mean s ready", "late", "p99 s ready", "late", "hit ready", "late",
         "late gain (mean)"],
        [[r["workload"], r["policy"], r["ready_mean_s"], r["late_mean_s"], r["ready_p99_s"], r["late_p99_s"],
          r["ready_hit"], r["late_hit"], ratio(r["ready_mean_s"], r["late_mean_s"])] for r in pb]),
        highlight=False)
    data = {"bench": "binding", "quick": quick, "hexgen": hx, "preble": pb}
    js = write_json(out / "bench-binding.json", data)
    console.print(f"json: {js}")
    return data
