"""The `flowserve` command line. Bad input exits 2 with one line naming the problem."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flowserve.errors import FlowserveError

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Serve and simulate LLM applications on heterogeneous clusters.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (print ratios, write JSON).")
app.add_typer(bench_app, name="bench")
tune_app = typer.Typer(no_args_is_help=True, help="Tune policy parameters by simulation.")
app.add_typer(tune_app, name="tune")
console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except FlowserveError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True,
                    disable=not sys.stderr.isatty())


def parse_scales(text: str) -> list[float]:
    from flowserve.errors import ConfigError

    try:
        scales = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--slo-scales: expected comma-separated numbers, got {text!r}") from None
    if not scales or any(s <= 0 for s in scales):
        raise ConfigError(f"--slo-scales: need positive numbers, got {text!r}")
    return scales


DEFAULT_SCALES = "1,1.5,2,3,4,5,6,8,10,12,15,20,25,30,40,50"


@app.command()
def simulate(
    cluster: Annotated[str, typer.Option(help="cluster YAML or built-in name (hetero-1, hetero-2, ...)")] = "hetero-1",
    workload: Annotated[str, typer.Option(help="workload YAML, built-in name, or recorded .jsonl trace")] = "text2sql",
    dispatch: Annotated[str, typer.Option(help="dispatch policy name")] = "round_robin",
    queue: Annotated[str, typer.Option(help="queue policy name")] = "fcfs",
    slo_scales: Annotated[str, typer.Option(help="comma-separated SLO scales")] = DEFAULT_SCALES,
    seed: Annotated[int | None, typer.Option(help="workload seed (overrides the workload's)")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="section.name=value; sections: workload, dispatch, queue, engine")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the summary as JSON")] = None,
    record_trace: Annotated[Path | None, typer.Option(help="write the simulated queries as a JSONL trace")] = None,
    plot: Annotated[Path | None, typer.Option(help="write the SLO attainment curve (PNG)")] = None,
) -> None:
    """Simulate one policy pair on a cluster and workload."""
    with user_errors():
        from flowserve.bench.experiment import evaluate
        from flowserve.bench.report import plot_attainment, policy_table, write_json
        from flowserve.config import load_cluster, parse_sets
        from flowserve.sim.run import PolicySpec
        from flowserve.workloads import load_workload
        from flowserve.workloads.trace import write_trace

        sets = parse_sets(set_)
        scales = parse_scales(slo_scales)
        specs = load_cluster(cluster, sets.get("engine"))
        wl_over = dict(sets.get("workload", {}))
        if seed is not None:
            wl_over["seed"] = seed
        wl = load_workload(workload, wl_over)
        policy = PolicySpec(dispatch, queue, sets.get("dispatch", {}), sets.get("queue", {}))
        with progress_bar() as bar:
            task = bar.add_task(f"{policy.label} on {wl.name}", total=len(scales))
            summary, _ = evaluate(specs, wl, policy, scales, progress=lambda: bar.advance(task))
        summary["cluster"] = cluster
        console.print(policy_table({policy.label: summary}), highlight=False)
        console.print(f"{summary['calls']} calls, simulated in {summary['sim_wall_s']:.2f} s")
        if json_out:
            write_json(json_out, summary)
            console.print(f"summary: {json_out}")
        if record_trace:
            write_trace(record_trace, wl.queries)
            console.print(f"trace: {record_trace}")
        if plot:
            plot_attainment({policy.label: summary}, plot, f"{wl.name} on {cluster}")
            console.print(f"plot: {plot}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for the report, JSON and plot")] = Path("out/demo"),
    queries: Annotated[int, typer.Option(help="text2sql queries to simulate")] = 200,
    rate: Annotated[float, typer.Option(help="queries per second")] = 0.5,
) -> None:
    """Text-to-SQL on Hetero-1 under every available policy combination."""
    with user_errors():
        from flowserve.bench.demo import run_demo

        run_demo(out, queries, rate, console, progress_bar)


@bench_app.command("core")
def bench_core(
    calls: Annotated[int, typer.Option(help="LLM calls to simulate (approximately)")] = 100_000,
    json_out: Annotated[Path, typer.Option("--json", help="where to write the results")] = Path("out/bench-core.json"),
) -> None:
    """Simulator speed (calls per wall second) and dispatch decisions per second."""
    with user_errors():
        from flowserve.bench.core_bench import run_core_bench

        run_core_bench(calls, json_out, console)


@bench_app.command("hexgen")
def bench_hexgen(
    out: Annotated[Path, typer.Option(help="folder for the markdown, JSON and plots")] = Path("out/bench-hexgen"),
    quick: Annotated[bool, typer.Option("--quick", help="a small subset (about a minute)")] = False,
    queries: Annotated[int | None, typer.Option(help="queries per run (default 150; --quick 60)")] = None,
    jobs: Annotated[int, typer.Option(help="settings simulated in parallel processes")] = 1,
) -> None:
    """Hexgen-Text2SQL: RR/WB × FCFS/urgency (and online α) on Hetero-1/2, paper tables."""
    with user_errors():
        from flowserve.bench.hexgen import run_hexgen_bench
        from flowserve.errors import ConfigError

        if jobs < 1 or (queries is not None and queries < 1):
            raise ConfigError("--jobs and --queries must be positive")
        run_hexgen_bench(out, quick, queries, console, jobs)


@tune_app.command("alpha")
def tune_alpha(
    trace: Annotated[Path, typer.Option(help="recorded JSONL trace (simulate --record-trace)")],
    cluster: Annotated[str, typer.Option(help="cluster YAML or built-in name")] = "hetero-1",
    queue: Annotated[str, typer.Option(help="queue policy the cluster runs")] = "urgency",
    beta: Annotated[float | None, typer.Option(help="hexgen_wb β (default: the policy's)")] = None,
    slo_scale: Annotated[float | None, typer.Option(
        help="deadlines = scale × standalone latency (default: no deadlines)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the sweep as JSON")] = None,
) -> None:
    """Offline α sweep of hexgen_wb on a recorded trace (Hexgen §4.3)."""
    with user_errors():
        from flowserve.bench.report import markdown_table, write_json
        from flowserve.config import load_cluster
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
    json_out: Annotated[Path | None, typer.Option("--json", help="write the comparison as JSON")] = None,
    queries: Annotated[int, typer.Option(help="synthetic queries per database")] = 2000,
) -> None:
    """Compare the synthetic text2sql generator with the real CHESS traces."""
    with user_errors():
        from flowserve.workloads.calibrate import calibration_report

        report, table = calibration_report(queries)
        console.print(table, highlight=False)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report, indent=2))
            console.print(f"json: {json_out}")


def main(argv: list[str] | None = None) -> Any:
    return app(argv)
