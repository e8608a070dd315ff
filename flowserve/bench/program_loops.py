"""The agent-loop part of `flowserve bench programs`: does program context change an order
that matters?

36 agent loops (`flowserve.workloads.programs` without fan-out: heavy-tailed numbers of
calls, a shared system prompt, a context that grows with each answer and tool result,
tool waits between calls) on one simulated engine that runs at most `max_inflight` 4
calls at once, so calls wait in the core and its queue decides their order. Two arrival
patterns: every program at once (`burst`), and a Poisson stream at `NEAR` of the rate
that keeps every slot busy (`stream`; measured on the burst under per-call FCFS: slots ÷
the slot-seconds a program's calls held). Every program has the same deadline
(`SLO_SCALE` × the median program's latency alone, as an agent product's one latency
target): a deadline per program scaled to its own length would tell the scheduler each
program's size, which no client says.

Contestants, by mean program latency: per-call FCFS (what any queue does with calls that
carry no program context: the same calls without program headers), `flowserve` and
Autellix ATLAS with program context, and the clairvoyant program-SRPT bound
(`flowserve.bench.program_bound`). The figure of merit is the share of the gap between
per-call FCFS and the bound that a contestant closes. Live (`run_loops_live`): the same
programs through `flowserve serve` on one simulated engine — per-call FCFS and `flowserve`
with the client sending no program headers, and `flowserve` with them.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowserve.bench.program_bound import ProgramSRPT
from flowserve.bench.programs_live import LiveArm, run_live
from flowserve.bench.programs_setup import SHAPE, SLO_SCALE, figures
from flowserve.host.settings import serve_config
from flowserve.metrics.tables import markdown_table
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.simulator import SimResult
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.program_trace import TracedQuery
from flowserve.workloads.programs import program_traces, traced_workload

LOOPS = 36
SLOTS = 4  # max_inflight of the one engine
NEAR = 0.9  # the stream's rate, as a share of the burst's programs per second
LOOP_CLUSTER = {"instances": [{"name": "a6000", "gpu": "A6000", "model": "llama-3.1-8b", "backend": "sim",
                               "count": 1, "max_inflight": SLOTS}]}
LOOP_SHAPE = dataclasses.replace(SHAPE, apps=1, thread_prob=0.0)  # agent loops sharing one system prompt
FCFS, BOUND, NO_HEADERS = "per-call fcfs", "program SRPT (clairvoyant)", "flowserve, no headers"
LOOP_CONTESTANTS: dict[str, PolicySpec] = {
    FCFS: PolicySpec("round_robin", "fcfs"),
    "autellix ATLAS": PolicySpec("autellix", "atlas"),
    "flowserve": PolicySpec("flowserve", "flowserve"),
    BOUND: PolicySpec("round_robin", ProgramSRPT),
}
MODES = ("burst", "stream")


def loop_cluster() -> tuple[InstanceSpec, ...]:
    return serve_config(dict(LOOP_CLUSTER), "bench programs loops").instances


def loop_traces(mode: str, seed: int, rate: float, n: int = LOOPS) -> list[TracedQuery]:
    """n agent loops: all arriving at 0 (`burst`) or at `rate` per second (`stream`)."""
    traced = program_traces(n, rate, seed, LOOP_SHAPE)
    if mode == "burst":
        traced = [dataclasses.replace(q, arrival=0.0) for q in traced]
    return traced


def gap_closed(fcfs_s: float, ours_s: float, bound_s: float) -> float | None:
    """The share of the gap between per-call FCFS and the bound a contestant closes:
    (FCFS − ours) / (FCFS − bound); None when the bound gains nothing."""
    gap = fcfs_s - bound_s
    return (fcfs_s - ours_s) / gap if gap > 1e-9 else None


def slot_rate(res: SimResult, slots: int) -> float:
    """Programs per second that keep `slots` calls running all the time: slots ÷ the mean
    slot-seconds (release to finish) of one program's calls."""
    held = sum(c.finished - c.released for c in res.calls)
    return slots * len(res.queries) / max(held, 1e-9)


def run_mode(traced: Sequence[TracedQuery], contestants: Sequence[str]) -> dict[str, Any]:
    wl = traced_workload("programs", list(traced))
    cluster = loop_cluster()
    alone = standalone_times(wl, cluster)
    deadline = SLO_SCALE * statistics.median(alone)
    runs = {name: simulate(cluster, wl, LOOP_CONTESTANTS[name], deadlines=[deadline] * len(traced))
            for name in contestants}
    rows = {name: figures(res) for name, res in runs.items()}
    fcfs, bound = rows[FCFS]["mean_s"], rows[BOUND]["mean_s"]
    for f in rows.values():
        f["gain_vs_fcfs"] = fcfs / f["mean_s"]
        f["gap_closed"] = gap_closed(fcfs, f["mean_s"], bound)
    return {"rows": rows, "bound_gain": fcfs / bound, "deadline_s": deadline,
            "slot_rate": slot_rate(runs[FCFS], SLOTS),
            "workload": [dataclasses.replace(q, deadline_s=deadline) for q in traced]}


def run_loops(seed: int, say: Callable[[str], None], contestants: Sequence[str] | None = None) -> dict[str, Any]:
    names = list(contestants or LOOP_CONTESTANTS)
    for must in (FCFS, BOUND):
        if must not in names:
            names.insert(0, must)
    out: dict[str, Any] = {}
    burst = run_mode(loop_traces("burst", seed, 1.0), names)
    out["burst"] = burst
    rate = NEAR * burst["slot_rate"]
    out["stream"] = run_mode(loop_traces("stream", seed, rate), names)
    out["stream"]["rate"] = rate
    for mode in MODES:
        for name, f in out[mode]["rows"].items():
            closed = f["gap_closed"]
            say(f"loops {mode}: {name}: mean {f['mean_s']:.2f} s, ×{f['gain_vs_fcfs']:.2f} vs per-call FCFS"
                + ("" if closed is None else f", {closed:.0%} of the gap to the bound"))
    return out


def run_loops_live(loops: dict[str, Any], out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Each mode's loops through `flowserve serve` on the one slot-limited simulated engine:
    per-call FCFS and `flowserve` without program headers, then `flowserve` with them."""
    arms = [LiveArm(FCFS, LOOP_CONTESTANTS[FCFS], headers=False),
            LiveArm(NO_HEADERS, LOOP_CONTESTANTS["flowserve"], headers=False),
            LiveArm("flowserve", LOOP_CONTESTANTS["flowserve"])]
    live = {}
    for mode in MODES:
        run = run_live(loops[mode]["workload"], arms, out / f"loops-{mode}", say, cluster_config=LOOP_CLUSTER)
        sim = loops[mode]["rows"]
        run["sim_ratio"] = sim[FCFS]["mean_s"] / sim["flowserve"]["mean_s"]
        live[mode] = run
    return live


def loop_goals(loops: dict[str, Any], live: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The issue's goals on the agent loops, per arrival pattern."""
    out = []
    for mode in MODES:
        rows = loops[mode]["rows"]
        ours, bound = rows["flowserve"], loops[mode]["bound_gain"]
        out.append({"goal": f"{mode}: flowserve with headers ≥ per-call FCFS (without them), simulated",
                    "value": round(ours["gain_vs_fcfs"], 3), "met": ours["gain_vs_fcfs"] >= 1.0})
        closed = ours["gap_closed"]
        out.append({"goal": f"{mode}: flowserve closes ≥ 50% of the gap to the clairvoyant bound (×{bound:.2f}), "
                            "simulated", "value": None if closed is None else f"{closed:.0%}",
                    "met": closed is None or closed >= 0.5})
        if bound >= 1.6:
            out.append({"goal": f"{mode}: flowserve ≥ 1.3× per-call FCFS where the bound allows ≥ 1.6×, simulated",
                        "value": round(ours["gain_vs_fcfs"], 3), "met": ours["gain_vs_fcfs"] >= 1.3})
        if live is not None:
            run = live[mode]["contestants"]
            with_, without = run["flowserve"]["mean_s"], run[NO_HEADERS]["mean_s"]
            out.append({"goal": f"{mode}: with headers never worse than without, live",
                        "value": round(without / with_, 3), "met": with_ <= without})
            err = abs(live[mode]["sim_ratio"] / live[mode]["ratio"] - 1)
            out.append({"goal": f"{mode}: the simulator predicts the live ratio within 25%", "value": f"{err:.1%}",
                        "met": err <= 0.25})
    return out


def loop_report(loops: dict[str, Any], live: dict[str, Any] | None) -> list[str]:
    lines = [f"## agent loops: {LOOPS} programs on one engine of {SLOTS} slots", ""]
    for mode in MODES:
        m = loops[mode]
        title = "all at once" if mode == "burst" else f"a Poisson stream at {m['rate']:.3f} programs/s"
        rows = [[n, round(f["mean_s"], 1), round(f["p95_s"]), f"{f['attainment']:.0%}", round(f["gain_vs_fcfs"], 3),
                 "-" if f["gap_closed"] is None else f"{f['gap_closed']:.0%}"] for n, f in m["rows"].items()]
        lines += [f"### {mode}: {title}, simulated (shared deadline {m['deadline_s']:.0f} s)", "",
                  markdown_table(["contestant", "mean s", "p95 s", "SLO", "FCFS mean ÷ mean", "gap closed"], rows), ""]
        if live is not None:
            run = live[mode]
            lines += [f"### {mode}, live (gateway on one simulated engine)", "", markdown_table(
                ["contestant", "headers", "mean s", "p95 s", "errors"],
                [[n, "yes" if f["headers"] else "no", round(f["mean_s"], 1), round(f["p95_s"]), f["errors"]]
                 for n, f in run["contestants"].items()]), "",
                f"load average {run['loadavg']}, time scale {run['time_scale']}", ""]
    lines += ["### goals", "", markdown_table(["goal", "value", "met"], [[g["goal"], g["value"], "yes" if g["met"]
                                                                              else "no"]
                                                                             for g in loop_goals(loops, live)]), ""]
    return lines
