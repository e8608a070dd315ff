"""Close the loop between a live run and the simulator: replay a recorded live run (the
published trace format with the live measurements that `flowserve text2sql eval --trace`
and the gateway's `--record` write) in the simulator, at the recorded arrival times, and compare.

The replay is the generic `agent_trace` workload: every recorded LLM call with its
recorded input and output lengths, candidates and evaluations in parallel. It does not
replay tool time (SQL execution, retrieval: not in the format), so the live latency
includes work the replay lacks; the report shows both and the per-query error.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.apps.text2sql.record import PARALLEL_STEPS
from flowserve.errors import ConfigError
from flowserve.metrics.tables import markdown_table
from flowserve.schema import read_text
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.agent_trace import AgentTrace, agent_trace, read_agent_trace, trace_records

RECORD = "record a live run with `flowserve serve --record DIR` or `flowserve text2sql eval --trace`"


@dataclasses.dataclass(frozen=True, slots=True)
class LiveQuery:
    """What a recorded query measured live: when it arrived, how long it took, and why it
    failed (`"failed"`: the kind; its live latency is then the time to its failure)."""

    arrival: float
    latency: float
    failed: str | None = None


def live_measurements(file: str, trace: AgentTrace | None = None) -> list[LiveQuery]:
    """Each query's live measurements, in file order — `arrival_s` as `text2sql eval
    --trace` writes it (a JSON list), or `arrival` as the gateway records it (JSON Lines,
    `serve --record`); ConfigError when absent. `trace`: the file already read."""
    trace = trace or read_agent_trace(file)  # the format's own checks first (and built-in names)
    if not Path(file).is_file():  # a built-in trace: published lengths, no live measurements
        raise ConfigError(f"trace {file!r} has no live measurements (arrival_s, latency_s); " + RECORD)
    out = []
    for where, item in trace_records(read_text(file, "trace file")):
        a, lat = item.get("arrival_s", item.get("arrival")), item.get("latency_s")
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
                 for v in (a, lat))
        if not ok:
            raise ConfigError(f"trace {file!r}: {where} has no live measurements (arrival or arrival_s, and "
                              f"latency_s ≥ 0); " + RECORD)
        failed = item.get("failed")
        out.append(LiveQuery(float(a), float(lat), None if failed is None else str(failed)))
    assert len(out) == len(trace.queries)
    return out


def _stats(xs: Sequence[float]) -> dict[str, float]:
    a = np.asarray(xs, dtype=float)
    return {"mean": float(a.mean()), "p50": float(np.median(a)), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def compare_replay(file: str, cluster: Sequence[InstanceSpec], dispatch: str = "round_robin",
                   queue: str = "fcfs") -> tuple[dict[str, Any], str]:
    trace = read_agent_trace(file)
    live = live_measurements(file, trace)
    steps = trace.steps()
    wl = agent_trace(file, 1.0, None, 0, parallel=[s for s in PARALLEL_STEPS if s in steps])
    # a gateway's record lists queries as they ended: replay them in arrival order, each
    # keeping its line's index as its id (the live latency it is compared with)
    specs = tuple(sorted((dataclasses.replace(q, arrival=live[i].arrival) for i, q in enumerate(wl.queries)),
                         key=lambda q: q.arrival))
    replay = dataclasses.replace(wl, queries=specs)
    result = simulate(cluster, replay, PolicySpec(dispatch, queue))
    sim_lat = {q.id: q.latency for q in result.queries if q.failed is None}
    pairs = [(live[i].latency, sim_lat[i]) for i in range(len(live)) if i in sim_lat]
    if not pairs:
        raise ConfigError(f"no query of {file!r} completed in the replay (see the cluster's context and models)")
    live_l, sim_l = [p[0] for p in pairs], [p[1] for p in pairs]
    err = [abs(s - v) / v for v, s in pairs if v > 0]
    calls_live = Counter(s for q in trace.queries for s, _, _ in q)
    calls_sim = Counter(c.stage for c in result.calls)
    report = {
        "trace": file, "queries": len(live), "replayed": len(pairs),
        "failed_live": [{"query": i, "reason": q.failed} for i, q in enumerate(live) if q.failed],
        "live_latency_s": _stats(live_l), "replay_latency_s": _stats(sim_l),
        "latency_ratio_replay_over_live": float(np.mean(sim_l) / np.mean(live_l)) if np.mean(live_l) > 0 else None,
        "per_query_rel_error": _stats(err) if err else None,
        "calls": {s: {"live": calls_live[s], "replay": calls_sim.get(s, 0)} for s in steps},
        "note": "the replay has the recorded LLM calls only (no SQL or retrieval time)",
    }
    rows = [["latency mean s", report["live_latency_s"]["mean"], report["replay_latency_s"]["mean"]],
            ["latency p50 s", report["live_latency_s"]["p50"], report["replay_latency_s"]["p50"]],
            ["latency p90 s", report["live_latency_s"]["p90"], report["replay_latency_s"]["p90"]]]
    rows += [[f"calls {s}", v["live"], v["replay"]] for s, v in report["calls"].items()]
    rows.append(["queries (failed live)", f"{len(live)} ({len(report['failed_live'])})", len(pairs)])
    table = markdown_table(["quantity", "live", "replay"], rows)
    if err:
        e = report["per_query_rel_error"]
        table += (f"\nper-query |replay − live| / live: mean {e['mean']:.3f}, p50 {e['p50']:.3f}, "
                  f"p90 {e['p90']:.3f}, max {e['max']:.3f}\n{report['note']}")
    return report, table
