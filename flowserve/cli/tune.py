"""`flowserve tune --trace FILE | --workload W ...`: a dispatch profile tuned on a trace in the
simulator (`flowserve.tune.profile_search`; `flowserve tune alpha` stays Hexgen's α sweep),
and `flowserve bench tune`, which measures what tuning gains (`flowserve.bench.tune_bench`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowserve.cli.common import (
    CLUSTER_HELP,
    bench_app,
    console,
    err_console,
    output_file,
    output_folder,
    tune_app,
    user_errors,
)
from flowserve.errors import ConfigError

if TYPE_CHECKING:
    from flowserve.tune.profile_search import TuneReport
    from flowserve.types.specs import InstanceSpec
    from flowserve.workloads.base import Workload

SEARCH_ADDS = ("prefix_hit", "queue_depth")  # scorers the search may add unless told otherwise


@tune_app.callback(invoke_without_command=True)
def tune(
    ctx: typer.Context,
    trace: Annotated[Path | None, typer.Option(help="a recorded JSON Lines trace (`serve --record DIR`, `simulate "
                                                    "--record-trace FILE`)")] = None,
    workload: Annotated[str | None, typer.Option(help="instead of a trace: a workload YAML or built-in name")] = None,
    seed: Annotated[int, typer.Option(help="the workload's seed (with --workload) and the sampler's")] = 0,
    queries: Annotated[int | None, typer.Option(help="with --workload: how many queries it generates")] = None,
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "hetero-1",
    budget: Annotated[int, typer.Option(help="simulations the search runs (the profile as given is the first)")] = 40,
    out: Annotated[Path | None, output_file("--out", help="where to write the profile (YAML): "
                                                          "`--dispatch PROFILE.yaml`, `gateway.dispatch`")] = None,
    profile: Annotated[str, typer.Option(help="the profile to start from: a shipped one or a file")] = "flowserve",
    queue: Annotated[str, typer.Option(help="the queue policy it runs with")] = "flowserve",
    jobs: Annotated[int, typer.Option(help="simulations at once, one process each")] = 2,
    metric: Annotated[str, typer.Option(help="what the search lowers: the queries' mean, p90 or p99 latency")] = "mean",
    slo_scale: Annotated[float | None, typer.Option(
        help="deadlines of this many standalone latencies (default: none)")] = None,
    scorer: Annotated[list[str] | None, typer.Option(
        help="a scorer the search may add to the profile (repeat; default: prefix_hit and queue_depth, llm-d's; "
             "`none`: none)")] = None,
    knob: Annotated[list[str] | None, typer.Option(
        help="search only this knob, e.g. finish.weight or uncached_work.w_free (repeat; default: every one)")] = None,
    peer: Annotated[list[str] | None, typer.Option(
        help="also run this contestant on the held-out half: a bench label or DISPATCH[+QUEUE] (repeat)")] = None,
    min_gain: Annotated[float, typer.Option(help="the tuned profile is kept only if it beats the default on the "
                                                 "validation part by this share")] = 0.01,
    json_out: Annotated[Path | None, output_file("--json", help="write the report as JSON")] = None,
) -> None:
    """Tune a dispatch profile's scorer weights and parameters by simulation on the first half of a
    trace and report default against tuned on the held-out second half (`tune alpha`: Hexgen's α)."""
    if ctx.invoked_subcommand is not None:
        return
    with user_errors():
        from flowserve.config import load_cluster
        from flowserve.metrics.tables import write_json
        from flowserve.policies.registry import profile_of
        from flowserve.sim.compare import contestants
        from flowserve.tune.profile_search import TuneRequest, tune_profile
        from flowserve.tune.trials import METRICS

        if (trace is None) == (workload is None):
            raise ConfigError("give the queries to tune on: --trace FILE (a recorded JSON Lines trace) or "
                              "--workload W, not both")
        if out is None:
            raise ConfigError("--out: where to write the tuned profile (a .yaml file)")
        if metric not in METRICS:
            raise ConfigError(f"--metric: expected one of {', '.join(METRICS)}, got {metric!r}")
        if queries is not None and workload is None:
            raise ConfigError("--queries sizes a generated workload: give it with --workload")
        specs = load_cluster(cluster)
        wl = _queries(trace, workload, seed, queries, specs)
        req = TuneRequest(wl, specs, profile_of(profile), budget, seed, jobs, queue, metric,  # type: ignore[arg-type]
                          slo_scale, added_scorers(scorer), tuple(knob or ()), min_gain, contestants(peer or []))
        report = tune_profile(req, lambda line: err_console.print(line, highlight=False))
        write_profile(out, report.profile.describe(), _origin(trace, workload, seed, cluster, report))
        console.print(report_lines(report), highlight=False)
        console.print(f"profile: {out}")
        if json_out:
            write_json(json_out, report.describe())
            console.print(f"json: {json_out}")


def added_scorers(given: list[str] | None) -> tuple[str, ...]:
    """The scorers the search may add: as given, llm-d's prefix and queue scorers by default, none for `none`."""
    if given is None:
        return SEARCH_ADDS
    return () if given == ["none"] else tuple(given)


def _queries(trace: Path | None, workload: str | None, seed: int, queries: int | None,
             specs: Sequence[InstanceSpec]) -> Workload:
    from flowserve.profiles.instance import max_context
    from flowserve.workloads.recorded import read_jsonl_trace
    from flowserve.workloads.registry import load_workload

    if trace is not None:
        return read_jsonl_trace(str(trace))
    overrides = {"seed": seed, **({"queries": queries} if queries is not None else {})}
    llm = [max_context(s) for s in specs if s.kind == "llm"]
    return load_workload(workload, overrides, min(llm) if llm else None)


def _origin(trace: Path | None, workload: str | None, seed: int, cluster: str, report: TuneReport) -> str:
    what = f"trace {trace}" if trace is not None else f"workload {workload} (seed {seed})"
    verdict = (f"tuned: {report.metric} latency ×{report.gain:.3f} the default's on the held-out half" if report.tuned
               else "the default: no tuned profile beat it on the validation part")
    return (f"flowserve tune on {what}, cluster {cluster}, {report.simulations} simulations "
            f"({report.trials} trials, {report.pruned} pruned); {verdict}")


def write_profile(path: Path, data: dict, origin: str) -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {origin}\n" + yaml.safe_dump(data, sort_keys=False))


def report_lines(report: TuneReport) -> str:
    from flowserve.metrics.tables import markdown_table

    rows = [["default", report.default_validation, report.default_test]]
    if report.tuned:
        rows.append(["tuned", report.best_validation, report.tuned_test])
    rows += [[name, None, value] for name, value in report.peers_test.items()]
    table = markdown_table(["profile", f"validation {report.metric} s", f"held-out {report.metric} s"], rows)
    verdict = (f"tuned profile kept: ×{report.gain:.3f} the default on the held-out half" if report.tuned else
               "the default is kept: no tuned profile beat it on the validation part")
    return f"{table}\n{verdict} ({report.simulations} simulations, {report.pruned} of {report.trials} trials pruned)"


@bench_app.command("tune")
def bench_tune(
    out: Annotated[Path, output_folder(help="folder for the markdown and JSON")] = Path("out/bench-tune"),
    workload: Annotated[list[str] | None, typer.Option(
        help="workloads of `bench compare` (default: tool_use, text2sql, programming, embodied_agent, lora)")] = None,
    seed: Annotated[list[int] | None, typer.Option(help="workload and sampler seeds (repeat; default 31, 37, "
                                                        "41)")] = None,
    queries: Annotated[int, typer.Option(help="interactive queries per workload, as `bench compare --queries`")] = 30,
    budget: Annotated[int, typer.Option(help="simulations each tuning runs")] = 40,
    jobs: Annotated[int, typer.Option(help="simulations at once, one process each")] = 2,
    metric: Annotated[str, typer.Option(help="mean, p90 or p99 query latency")] = "mean",
    scorer: Annotated[list[str] | None, typer.Option(
        help="a scorer the search may add (repeat; default: prefix_hit and queue_depth; `none`: none)")] = None,
) -> None:
    """`flowserve tune` on workloads of `bench compare`: the tuned profile against the default and
    every other contestant on each trace's held-out half."""
    with user_errors():
        from flowserve.bench.tune_bench import run_tune_bench, table
        from flowserve.tune.trials import METRICS

        if metric not in METRICS:
            raise ConfigError(f"--metric: expected one of {', '.join(METRICS)}, got {metric!r}")
        if queries < 1 or budget < 1:
            raise ConfigError("--queries and --budget must be at least 1")
        data = run_tune_bench(out, workload, seed or [31, 37, 41], queries, budget, jobs, metric,  # type: ignore[arg-type]
                              added_scorers(scorer), lambda line: err_console.print(line, highlight=False))
        console.print(table(data["cases"]), highlight=False)
        console.print(f"goal (tuned ≥ 1.05× the default where it is not the best contestant, ≥ 0.99× everywhere): "
                      f"{'met' if data['goal_met'] else 'missed'} ({data['wall_s']:.0f} s)\n"
                      f"json: {out / 'bench-tune.json'}\ntable: {out / 'bench-tune.md'}", highlight=False)
