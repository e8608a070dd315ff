"""The golden simulations: a handful of quick runs across policies and workload shapes on
fixed seeds, summarised into plain numbers (`tests/sim/golden.json`), which
`tests/sim/test_golden.py` checks every change against: a refactor of the core, the
policies or the simulator must leave every figure as it was.

The fixture is regenerated only on purpose, when a change is meant to move the numbers:

    python tests/support/golden_cases.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parents[1] / "sim" / "golden.json"
SCALES = (1, 2, 4, 8)
MOVIES = str(Path(__file__).resolve().parents[2] / "flowserve" / "data" / "llmsql" / "movies_small.csv")

# name → (cluster, workload config, dispatch, queue, policy params)
CASES: dict[str, tuple[str | dict[str, Any], dict[str, Any], str, str, dict[str, Any]]] = {
    "rr_fcfs_text2sql": ("hetero-1", {"kind": "text2sql", "trace": "mixed", "rate": 1.0, "queries": 24},
                         "round_robin", "fcfs", {}),
    "least_load_fcfs_text2sql": ("hetero-1", {"kind": "text2sql", "trace": "financial", "rate": 1.0,
                                              "queries": 24}, "least_load", "fcfs", {}),
    "hexgen_urgency_text2sql": ("hetero-1", {"kind": "text2sql", "trace": "formula1", "rate": 1.0,
                                             "queries": 24}, "hexgen_wb", "urgency", {}),
    "hexgen_tuned_text2sql": ("hetero-1", {"kind": "text2sql", "trace": "mixed", "rate": 1.0, "queries": 30},
                              "hexgen_wb", "fcfs", {"alpha_tuning": True, "window_s": 15.0}),
    "preble_groups_tool_use": ("hetero-1", {"kind": "tool_use", "rate": 4.0, "queries": 60},
                               "preble_e2", "prefix_groups", {}),
    "flowserve_mixed": ("hetero-1", {"kind": "mixed", "rate": 3.0, "queries": 50}, "flowserve", "flowserve", {}),
    "late_least_load_programming": ("hetero-1", {"kind": "programming", "rate": 2.0, "queries": 16},
                                    "least_load", "fcfs", {"binding": "late"}),
    "autellix_plas_programs": ("hetero-1", {"kind": "programs", "rate": 1.0, "queries": 20},
                               "autellix", "plas", {}),
    "flowserve_programs": ("hetero-1", {"kind": "programs", "rate": 1.0, "queries": 20},
                           "flowserve", "flowserve", {}),
    "teola_naive_rag_ops": ("teola", {"kind": "naive_rag", "rate": 0.5, "queries": 8},
                            "least_load", "topology", {}),
    "teola_search_gen_ops": ("teola", {"kind": "search_gen", "rate": 1.0, "queries": 10},
                             "round_robin", "fcfs", {}),
    # the peer routers and flowserve's dispatch on prefix-heavy tool use and on text2sql's deadlines
    # (hetero-1: two kinds of GPU), every call's instance pinned: a profile makes the same decisions
    "llmd_tool_use": ("hetero-1", {"kind": "tool_use", "rate": 4.0, "queries": 60}, "llmd", "fcfs", {}),
    "dynamo_kv_tool_use": ("hetero-1", {"kind": "tool_use", "rate": 4.0, "queries": 60}, "dynamo_kv", "fcfs", {}),
    "flowserve_tool_use": ("hetero-1", {"kind": "tool_use", "rate": 4.0, "queries": 60}, "flowserve", "flowserve",
                           {}),
    "flowserve_fcfs_text2sql": ("hetero-1", {"kind": "text2sql", "trace": "mixed", "rate": 1.5, "queries": 30},
                                "flowserve", "fcfs", {}),
    "llm_sql_prefix_affinity": ("hetero-1", {"kind": "llm_sql", "table": MOVIES,
                                             "query": "SELECT LLM('Summarize: {movie_title} {movie_info}', "
                                                      "movie_title, movie_info) FROM movies_small"},
                                "prefix_affinity", "fcfs", {}),
    "context_overflow_long_doc": ({"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-2-7b",
                                                  "count": 2}]},
                                  {"kind": "long_doc_qa", "rate": 2.0, "queries": 8, "max_prompt": 4200},
                                  "round_robin", "fcfs", {}),
}


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def placements(res: Any) -> str:
    """A digest of where every call ran (call id → instance), in call order: one decision
    that moves changes it."""
    rows = sorted((c.call_id, c.instance) for c in res.calls)
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def summary(name: str) -> dict[str, Any]:
    """One case, simulated and reduced to the figures the fixture pins."""
    from flowserve.api import simulate

    cluster, workload, dispatch, queue, params = CASES[name]
    res = simulate(cluster, workload, dispatch, queue, slo_scales=SCALES, **params)
    primary = res.primary
    return {
        "min_slo_scale": {k: _r(v) for k, v in res["min_slo_scale"].items()},
        "slo_attainment": {str(p["scale"]): _r(p["attainment"]) for p in res["slo_attainment"]},
        "completed": res["completed"],
        "failed": res["failed"],
        "failure_reasons": res["failure_reasons"],
        "mean_latency_s": _r(res["latency_s"]["mean"]),
        "p90_latency_s": _r(res["latency_s"]["p90"]),
        "token_hit_rate": _r(res["token_hit_rate"]),
        "calls": res["calls"],
        "sim_events": res["sim_events"],
        "decisions": {str(s): r.decisions for s, r in sorted(res.runs.items())},
        "placements": {str(s): placements(r) for s, r in sorted(res.runs.items())},
        "policy_stats": {k: int(v) for k, v in sorted(primary.policy_stats.items())},
        "policy_changes": [{k: v for k, v in sorted(c.params.items()) if k in ("alpha", "reason", "error")}
                           for c in primary.policy_changes],
        "per_instance": {i.name: [i.dispatched, i.completed, i.prefilled_tokens, i.cached_tokens]
                         for i in primary.instances},
        "makespan_s": _r(primary.makespan),
    }


def all_summaries() -> dict[str, dict[str, Any]]:
    return {name: summary(name) for name in CASES}


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/support/golden_cases.py --write   (rewrites tests/sim/golden.json)")
    FIXTURE.write_text(json.dumps(all_summaries(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
