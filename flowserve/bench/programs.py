"""`flowserve bench programs`: agentic programs (Autellix-like) in the simulator and live.

Workload (`flowserve.workloads.programs`, the shape below): programs with a heavy-tailed
number of calls, a context that grows with every answer and tool result, tool waits
between calls, and a quarter of them fanning out into parallel threads; each program's
deadline is its standalone latency (alone on the fastest instance, cold cache, tool time
included) × `SLO_SCALE`. Cluster: 4 simulated A6000s serving Llama-3.1-8B.

Contestants: per-call round-robin + FCFS (vLLM behind a balancer), `sglang_cache_aware`,
`llmd`, Autellix (its locality-aware balancer with PLAS, and with ATLAS), and flowserve
with program context. Figures per arrival rate: mean and p95 program latency, SLO
attainment, token hit rate, engine utilisation; throughput at equal p95 (the highest
rate at which each keeps its p95 within a common target). Near saturation is the highest
swept rate at which the best contestant still meets 90% of the deadlines.

Live (`flowserve.bench.programs_live`): the same programs through `flowserve serve` on
simulated engines at that rate, played by a separate client process, and the gateway's
own recording of them replayed in the simulator. Goals: flowserve ≥ 2× better mean
program latency than round-robin + FCFS near saturation and ≥ the best other
contestant; the simulator's ratio within 25% of the live one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowserve.bench.program_loops import MODES, loop_goals, loop_report, run_loops, run_loops_live
from flowserve.bench.programs_live import arms_of, run_live
from flowserve.bench.programs_setup import (
    ATTAINED,
    BASELINE,
    CLUSTER,
    CONTESTANTS,
    DURATION_S,
    OURS,
    RATES,
    SHAPE,
    SLO_SCALE,
    cluster,
    sim_run,
    with_deadlines,
)
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.sim.run import standalone_times
from flowserve.workloads.program_trace import TracedQuery
from flowserve.workloads.programs import program_traces, traced_workload


def throughput_at(rates: Sequence[float], p95: Sequence[float], target: float) -> tuple[float, bool]:
    """The arrival rate at which p95 latency reaches `target`, interpolated linearly between
    swept rates; (rate, True) when it stays below the target at every rate swept (a bound)."""
    for i, (r, p) in enumerate(zip(rates, p95, strict=True)):
        if p > target:
            if i == 0:
                return 0.0, False
            r0, p0 = rates[i - 1], p95[i - 1]
            return r0 + (r - r0) * (target - p0) / (p - p0), False
    return rates[-1], True


def near_saturation(rows: dict[float, dict[str, dict[str, Any]]]) -> float:
    """The highest rate at which the best contestant still meets `ATTAINED` of the deadlines."""
    ok = [r for r, by in rows.items() if max(f["attainment"] for f in by.values()) >= ATTAINED]
    return max(ok) if ok else min(rows)


def run_sim(mode: str, seed: int, contestants: Sequence[str], say: Callable[[str], None]) -> dict[str, Any]:
    rates = RATES[mode]
    rows: dict[float, dict[str, dict[str, Any]]] = {}
    workloads: dict[float, list[TracedQuery]] = {}
    for rate in rates:
        traced = program_traces(int(rate * DURATION_S[mode]), rate, seed, SHAPE)
        wl = traced_workload("programs", traced)
        alone = standalone_times(wl, cluster())
        workloads[rate] = with_deadlines(traced, alone)
        rows[rate] = {}
        for name in contestants:
            rows[rate][name] = sim_run(wl, CONTESTANTS[name], alone)
            f = rows[rate][name]
            say(f"sim rate {rate}/s {name}: mean {f['mean_s']:.1f} s, p95 {f['p95_s']:.0f} s, "
                f"SLO {f['attainment']:.0%}, hit {f['hit_rate']:.2f}")
    target = 2 * min(f["p95_s"] for f in rows[rates[0]].values())
    tput = {name: throughput_at(rates, [rows[r][name]["p95_s"] for r in rates], target) for name in contestants}
    return {"rates": list(rates), "rows": {str(r): by for r, by in rows.items()}, "p95_target_s": target,
            "throughput": {n: {"rate": t, "at_least": bound} for n, (t, bound) in tput.items()},
            "near_saturation": near_saturation(rows), "workloads": workloads}


def goals(sim: dict[str, Any], live: dict[str, Any] | None) -> list[dict[str, Any]]:
    rate = sim["near_saturation"]
    at = sim["rows"][str(rate)]
    ours = at[OURS]["mean_s"]
    others = {n: f["mean_s"] for n, f in at.items() if n != OURS}
    best_name = min((n for n in others if n != BASELINE), key=others.__getitem__, default=BASELINE)
    ratio = at[BASELINE]["mean_s"] / ours
    out = [
        {"goal": f"flowserve ≥ 2× mean program latency vs {BASELINE} near saturation ({rate}/s), simulated",
         "value": round(ratio, 2), "met": ratio >= 2.0},
        {"goal": f"flowserve ≥ the best other contestant ({best_name}) on mean latency, simulated",
         "value": round(others[best_name] / ours, 3), "met": ours <= others[best_name] * 1.0001},
    ]
    if live is not None and live.get("ratio") is not None:
        lr = live["ratio"]
        out.append({"goal": f"flowserve ≥ 2× mean program latency vs {BASELINE}, live", "value": round(lr, 2),
                    "met": lr >= 2.0})
        err = abs(live["sim_ratio"] / lr - 1)
        out.append({"goal": "the simulator predicts the live ratio within 25%", "value": f"{err:.1%}",
                    "met": err <= 0.25})
    return out


def report(sim: dict[str, Any], live: dict[str, Any] | None) -> str:
    lines = ["# bench programs", ""]
    names = list(next(iter(sim["rows"].values())))
    for r in sim["rates"]:
        by = sim["rows"][str(r)]
        rows = [[n, round(f["mean_s"], 1), round(f["p95_s"]), f"{f['attainment']:.0%}", round(f["hit_rate"], 3),
                 round(f["utilisation"], 2), round(by[BASELINE]["mean_s"] / f["mean_s"], 2)]
                for n, f in ((n, by[n]) for n in names)]
        lines += [f"## simulated, {r} programs/s" + (" (near saturation)" if r == sim["near_saturation"] else ""),
                  "", markdown_table(["contestant", "mean s", "p95 s", "SLO", "hit rate", "utilisation",
                                      f"{BASELINE} mean ÷ mean"], rows), ""]
    tp = sim["throughput"]
    lines += [f"## throughput at equal p95 (≤ {sim['p95_target_s']:.0f} s)", "",
              markdown_table(["contestant", "programs/s"],
                             [[n, ("≥ " if t["at_least"] else "") + f"{t['rate']:.2f}"] for n, t in tp.items()]), ""]
    if live is not None:
        lines += ["## live (gateway on simulated engines)", "", markdown_table(
            ["contestant", "mean s", "p95 s", "SLO", "errors", "recorded → simulated mean s"],
            [[n, round(f["mean_s"], 1), round(f["p95_s"]), f"{f['attainment']:.0%}", f["errors"],
              round(f["replayed_mean_s"], 1) if f.get("replayed_mean_s") else "-"]
             for n, f in live["contestants"].items()]), "",
            f"load average {live['loadavg']}, time scale {live['time_scale']}, client CPU share "
            f"{live['client_cpu_share']}", ""]
    lines += ["## goals", "", markdown_table(["goal", "value", "met"],
                                             [[g["goal"], g["value"], "yes" if g["met"] else "no"]
                                              for g in goals(sim, live)]), ""]
    return "\n".join(lines)


def run_programs_bench(out: Path, quick: bool, live: bool, seed: int, contestants: Sequence[str] | None,
                       say: Callable[[str], None], loops: bool = True) -> dict[str, Any]:
    mode = "quick" if quick else "full"
    names = list(contestants or CONTESTANTS)
    for must in (BASELINE, OURS):
        if must not in names:
            names.insert(0, must)
    sim = run_sim(mode, seed, names, say)
    live_data = None
    if live:
        rate = sim["near_saturation"]
        live_data = run_live(sim["workloads"][rate], arms_of([BASELINE, OURS]), out, say)
        at = sim["rows"][str(rate)]
        live_data["sim_ratio"] = at[BASELINE]["mean_s"] / at[OURS]["mean_s"]
    loop_data = loop_live = None
    if loops:
        loop_data = run_loops(seed, say)
        if live:
            loop_live = run_loops_live(loop_data, out, say)
    data = {"bench": "programs", "mode": mode, "seed": seed, "cluster": CLUSTER, "shape": SHAPE.__dict__,
            "slo_scale": SLO_SCALE, "sim": {k: v for k, v in sim.items() if k != "workloads"}, "live": live_data,
            "goals": goals(sim, live_data)}
    if loop_data is not None:
        data["loops"] = {mode: {k: v for k, v in loop_data[mode].items() if k != "workload"} for mode in MODES}
        data["loops_live"] = loop_live
        data["loop_goals"] = loop_goals(loop_data, loop_live)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "bench-programs.json", data)
    text = report(sim, live_data)
    if loop_data is not None:
        text += "\n".join(loop_report(loop_data, loop_live))
    (out / "bench-programs.md").write_text(text)
    say(text)
    return data
