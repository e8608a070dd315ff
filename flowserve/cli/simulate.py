"""`flowserve simulate`, `demo`, `calibrate` and `tune alpha`: the simulator's commands."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import (
    CLUSTER_HELP,
    DEFAULT_SCALES,
    DISPATCH_NAMES,
    QUEUE_NAMES,
    app,
    console,
    err_console,
    output_file,
    output_folder,
    parse_scales,
    progress_bar,
    tune_app,
    user_errors,
)
from flowserve.errors import ConfigError


@app.command()
def simulate(
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "hetero-1",
    workload: Annotated[str, typer.Option(help="workload YAML, built-in name, or recorded .jsonl trace")] = "text2sql",
    dispatch: Annotated[str, typer.Option(help=f"dispatch policy: {DISPATCH_NAMES}")] = "round_robin",
    queue: Annotated[str, typer.Option(help=f"queue policy: {QUEUE_NAMES}")] = "fcfs",
    passes: Annotated[str, typer.Option(help="graph passes: none, all, or a list (prune,decompose,"
                                             "prefill_split,pipeline)")] = "none",
    slo_scales: Annotated[str, typer.Option(help="comma-separated SLO scales")] = DEFAULT_SCALES,
    seed: Annotated[int | None, typer.Option(help="workload seed (overrides the workload's)")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="section.name=value; sections: workload, dispatch, queue, engine")] = None,
    json_out: Annotated[Path | None, output_file("--json", help="write the summary as JSON")] = None,
    record_trace: Annotated[Path | None, output_file(help="write the simulated queries as a JSONL trace")] = None,
    plot: Annotated[Path | None, output_file(help="write the SLO attainment curve and latency CDF (PNG)")] = None,
    replicas: Annotated[int, typer.Option(help="schedulers taking queries in turn (a round-robin client), each "
                                               "deciding from its own view (docs/replicas.md)")] = 1,
    sync_ms: Annotated[float, typer.Option(help="with --replicas: how often each replica syncs with the others "
                                                "(gateway.state.sync_ms)")] = 20.0,
    cache_view: Annotated[str | None, typer.Option(
        help="how the router learns what the engines cache: precise (their KV-cache events), estimated (the "
             "gateway's estimate) or engine (every eviction reported, an ideal); default: precise where an "
             "instance has kv_events, estimated elsewhere (docs/kv-events.md)")] = None,
) -> None:
    """Simulate one policy pair on a cluster and workload."""
    with user_errors():
        from flowserve.api import simulate as run_simulation
        from flowserve.config import parse_sets
        from flowserve.metrics.plots import plot_attainment
        from flowserve.metrics.tables import policy_table, write_json
        from flowserve.schema import read_yaml
        from flowserve.workloads.trace import write_trace

        if cache_view is not None and cache_view not in ("precise", "estimated", "engine"):
            raise ConfigError(f"--cache-view: expected precise, estimated or engine, got {cache_view!r}")
        view = cache_view or "configured"
        sets = parse_sets(set_)
        scales = parse_scales(slo_scales)
        if Path(cluster).is_file() and "gateway" in read_yaml(cluster):
            console.print(f"{cluster}: its gateway: section is for `flowserve serve`; simulating with "
                          f"--dispatch {dispatch} --queue {queue}", highlight=False)
        with progress_bar() as bar:
            task = bar.add_task(f"{dispatch}+{queue} on {workload}", total=len(scales))
            result = run_simulation(cluster, workload, dispatch, queue, slo_scales=scales, seed=seed, passes=passes,
                                    dispatch_params=sets.get("dispatch"), queue_params=sets.get("queue"),
                                    workload_params=sets.get("workload"), engine_params=sets.get("engine"),
                                    progress=lambda: bar.advance(task), replicas=replicas, sync_ms=sync_ms,
                                    cache_view=view)
        summary = result.summary
        for note in summary["notes"]:
            console.print(note, highlight=False)
        label = f"{summary['policy']['dispatch']}+{summary['policy']['queue']}"
        if replicas > 1:
            label += f" ×{replicas} replicas, sync {sync_ms:g} ms"
        console.print(policy_table({label: summary}), highlight=False)
        console.print(f"{summary['calls']} calls, simulated in {summary['sim_wall_s']:.2f} s; cache view {view}: "
                      f"TTFT p90 {seconds(summary['call_ttft_s'].get('p90'))}, token hit rate "
                      f"{summary.get('token_hit_rate') or 0.0:.3f}", highlight=False)
        if (slo := summary.get("latency_slo")) is not None:
            console.print(f"TTFT/TPOT objectives: {slo['met']} of {slo['requests']} requests met both "
                          f"({slo['share_met']:.3f}), {slo['shed']} shed", highlight=False)
        if json_out:
            write_json(json_out, summary)
            console.print(f"summary: {json_out}")
        if record_trace:
            write_trace(record_trace, result.workload.queries)
            console.print(f"trace: {record_trace}")
        if plot:
            lat = {label: [q.latency for q in result.primary.queries]}
            plot_attainment({label: summary}, plot, f"{summary['workload']} on {cluster}", lat)
            console.print(f"plot: {plot}")


@app.command()
def demo(
    out: Annotated[Path, output_folder(help="folder for the report, JSON and plot")] = Path("out/demo"),
    queries: Annotated[int, typer.Option(help="text2sql queries to simulate")] = 200,
    rate: Annotated[float, typer.Option(help="queries per second")] = 0.5,
    every_pair: Annotated[bool, typer.Option(
        "--every-pair", help="every dispatch × queue policy pair (slow) instead of the designed pairs")] = False,
    jobs: Annotated[int | None, typer.Option(min=1, max=64, help="policies simulated at once, one process each "
                                                                 "(default: up to 2)")] = None,
) -> None:
    """Text-to-SQL on Hetero-1: every dispatch policy with FCFS and each queue policy with the
    dispatch policy it was designed with."""
    with user_errors():
        if queries < 1 or not math.isfinite(rate) or rate <= 0:
            raise ConfigError("--queries and --rate must be positive (and finite)")
        from flowserve.bench.demo import run_demo

        log = None if sys.stderr.isatty() else (lambda msg: err_console.print(msg, highlight=False))
        run_demo(out, queries, rate, console, progress_bar, log, every_pair, jobs)


@tune_app.command("alpha")
def tune_alpha(
    trace: Annotated[Path, typer.Option(help="recorded JSONL trace (simulate --record-trace, or what the "
                                              "gateway recorded: serve --record)")],
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "hetero-1",
    queue: Annotated[str, typer.Option(help="queue policy the cluster runs")] = "urgency",
    beta: Annotated[float | None, typer.Option(help="hexgen_wb β (default: the policy's)")] = None,
    slo_scale: Annotated[float | None, typer.Option(
        help="deadlines = scale × standalone latency (default: no deadlines)")] = None,
    json_out: Annotated[Path | None, output_file("--json", help="write the sweep as JSON")] = None,
) -> None:
    """Offline α sweep of hexgen_wb on a recorded trace (Hexgen §4.3)."""
    with user_errors():
        from flowserve.config import load_cluster
        from flowserve.metrics.tables import markdown_table, write_json
        from flowserve.tune.alpha import tune_trace

        specs = load_cluster(cluster)
        result, wall = tune_trace(specs, str(trace), queue, beta, slo_scale)
        rows = [[f"{a:.1f}", lat, "←" if a == result.alpha else ""]
                for a, lat in sorted(result.mean_latency.items())]
        console.print(markdown_table(["α", "mean latency s", "best"], rows), highlight=False)
        console.print(f"best α = {result.alpha:.1f} ({result.queries} queries, {result.calls} calls, "
                      f"{len(result.mean_latency)} simulations in {wall:.2f} s)")
        if json_out:
            write_json(json_out, {"trace": str(trace), "cluster": cluster, "queue": queue,
                                  "alpha": result.alpha, "wall_s": wall,
                                  "mean_latency": {str(a): v for a, v in result.mean_latency.items()}})
            console.print(f"json: {json_out}")


@app.command()
def calibrate(
    json_out: Annotated[Path | None, output_file("--json", help="write the comparison as JSON")] = None,
    queries: Annotated[int, typer.Option(help="synthetic queries per database")] = 2000,
    trace: Annotated[str | None, typer.Option(help="print this agent trace's statistics instead "
                                              "(a file in the published format, or a built-in name)")] = None,
    cluster: Annotated[str | None, typer.Option(help="with --trace of a recorded live run: replay it on "
                                                f"this cluster, compare with the live run ({CLUSTER_HELP})")] = None,
    dispatch: Annotated[str, typer.Option(help="--cluster: dispatch policy of the replay")] = "round_robin",
    queue: Annotated[str, typer.Option(help="--cluster: queue policy of the replay")] = "fcfs",
) -> None:
    """Compare the synthetic text2sql generator with the real CHESS traces, print the
    statistics of any agent trace (--trace), or compare a recorded live run with its
    replay in the simulator (--trace T --cluster C)."""
    with user_errors():
        from flowserve.calibrate.traces import calibration_report, trace_statistics
        from flowserve.errors import ConfigError

        if cluster is not None:
            from flowserve.calibrate.live_trace import compare_replay
            from flowserve.config import load_cluster

            if trace is None:
                raise ConfigError("--cluster compares a recorded live run: give it with --trace")
            report, table = compare_replay(trace, load_cluster(cluster), dispatch, queue)
        else:
            report, table = trace_statistics(trace) if trace else calibration_report(queries)
        console.print(table, highlight=False)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report, indent=2))
            console.print(f"json: {json_out}")


def seconds(value: float | None) -> str:
    """A duration for the summary line (none when no call ran: every query failed)."""
    return "—" if value is None else f"{value:.3f} s"
