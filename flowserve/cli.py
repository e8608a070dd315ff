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
engines_app = typer.Typer(no_args_is_help=True, help="Real engines: build llama-server, write the tiny test model.")
app.add_typer(engines_app, name="engines")
tune_app = typer.Typer(no_args_is_help=True, help="Tune policy parameters by simulation.")
app.add_typer(tune_app, name="tune")
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


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
    plot: Annotated[Path | None, typer.Option(help="write the SLO attainment curve and latency CDF (PNG)")] = None,
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
            summary, runs = evaluate(specs, wl, policy, scales, progress=lambda: bar.advance(task))
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
            lat = {policy.label: [q.latency for q in runs[max(runs)].queries]}
            plot_attainment({policy.label: summary}, plot, f"{wl.name} on {cluster}", lat)
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


@bench_app.command("preble")
def bench_preble(
    quick: Annotated[bool, typer.Option("--quick", help="short runs (~2 minutes in all)")] = False,
    out: Annotated[Path, typer.Option(help="folder for the report, JSON and plot")] = Path("out/bench-preble"),
    cluster: Annotated[list[str] | None, typer.Option(help="preble-a6000 and/or preble-h100 (default both)")] = None,
    workload: Annotated[list[str] | None, typer.Option(help="Preble workload kinds (default all five)")] = None,
) -> None:
    """Preble's clusters × workloads × E2 ablation stack, ratios against round-robin."""
    with user_errors():
        from flowserve.bench.preble import CLUSTERS, run_preble_bench
        from flowserve.errors import ConfigError
        from flowserve.workloads.preble import KINDS

        for c in cluster or ():
            if c not in CLUSTERS:
                raise ConfigError(f"--cluster: unknown {c!r}; known: {', '.join(CLUSTERS)}")
        for w in workload or ():
            if w not in KINDS:
                raise ConfigError(f"--workload: unknown {w!r}; known: {', '.join(KINDS)}")
        run_preble_bench(out, quick, console, cluster, workload)


@bench_app.command("router")
def bench_router(
    nodes: Annotated[int, typer.Option(help="tree nodes to build before timing (≥ 100,000 for the goal)")] = 100_000,
    decisions: Annotated[int, typer.Option(help="dispatch decisions to time")] = 20_000,
    json_out: Annotated[Path, typer.Option("--json", help="results JSON")] = Path("out/bench-router.json"),
) -> None:
    """E2 dispatch decisions per second for 2k-token prompts on a large prefix tree (one core)."""
    with user_errors():
        from flowserve.bench.router_bench import run_router_bench
        from flowserve.errors import ConfigError

        if nodes < 1 or decisions < 1:
            raise ConfigError("--nodes and --decisions must be positive")
        run_router_bench(nodes, decisions, json_out, console)


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
        from flowserve.calibrate.traces import calibration_report

        report, table = calibration_report(queries)
        console.print(table, highlight=False)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report, indent=2))
            console.print(f"json: {json_out}")


@engines_app.command("build")
def engines_build(
    version: Annotated[str | None, typer.Option(help="llama-cpp-python sdist version (default: pinned)")] = None,
) -> None:
    """Build llama-server from the llama-cpp-python sdist (cached) and print its path."""
    with user_errors():
        from flowserve.engines.llamacpp import DEFAULT_VERSION, ensure_llama_server

        path = ensure_llama_server(version or DEFAULT_VERSION, progress=lambda m: err_console.print(m))
        console.print(str(path), highlight=False, soft_wrap=True)


@engines_app.command("tiny-model")
def engines_tiny_model(
    out: Annotated[Path, typer.Option(help="GGUF file to write (tokenizer.json goes next to it)")] = Path(
        "out/tiny-llama.gguf"),
    seed: Annotated[int, typer.Option(help="seed of the vocabulary corpus and the weights")] = 0,
    layers: Annotated[int, typer.Option(help="transformer blocks")] = 4,
    embd: Annotated[int, typer.Option(help="embedding width")] = 128,
) -> None:
    """Write the tiny random-weight Llama used by tests and benchmarks."""
    with user_errors():
        from flowserve.engines.tinymodel import TinyLlamaConfig, write_tiny_llama

        model = write_tiny_llama(out, TinyLlamaConfig(seed=seed, n_layer=layers, n_embd=embd))
        console.print(f"{model.gguf} ({model.gguf.stat().st_size / 1e6:.1f} MB, vocabulary {model.vocab_size}); "
                      f"tokenizer: {model.tokenizer_json}", highlight=False, soft_wrap=True)


@app.command()
def profile(
    url: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible engine (no /v1)")],
    model: Annotated[str, typer.Option(help="model name (sent as `model`, written in the profile)")],
    out: Annotated[Path | None, typer.Option(help="profile YAML to write [default: out/profiles/MODEL.yaml]")] = None,
    engine: Annotated[str, typer.Option(help="auto, llamacpp, vllm, sglang or openai")] = "auto",
    api_key: Annotated[str | None, typer.Option(help="bearer token for the engine")] = None,
    slots: Annotated[int | None, typer.Option(help="concurrent sequences (default: reported by the engine)")] = None,
    max_context: Annotated[int | None, typer.Option(help="tokens per sequence (default: reported)")] = None,
    kv_capacity: Annotated[int | None, typer.Option(help="KV cache tokens (default: the context)")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="vocabulary size (default: reported)")] = None,
    token_budget: Annotated[int, typer.Option(help="tokens per engine iteration (llama-server -b)")] = 2048,
    repeats: Annotated[int, typer.Option(help="runs per measured point (median)")] = 3,
    quick: Annotated[bool, typer.Option(help="few points, seconds (smoke tests)")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the measurements as JSON")] = None,
) -> None:
    """Measure an engine (prefill, decode, cached prefix), fit the cost model, write a profile."""
    with user_errors():
        import asyncio

        from flowserve.calibrate.profiler import ProfileSettings, detect_engine, engine_facts, profile_engine
        from flowserve.engines.client import EngineClient
        from flowserve.errors import ConfigError

        if engine not in ("auto", "llamacpp", "vllm", "sglang", "openai"):
            raise ConfigError(f"--engine: expected auto, llamacpp, vllm, sglang or openai, got {engine!r}")
        if min(repeats, token_budget) < 1:
            raise ConfigError("--repeats and --token-budget must be positive")

        async def run() -> Any:
            kind = await detect_engine(url) if engine == "auto" else engine
            async with EngineClient(url, model=model, engine=kind, api_key=api_key) as client:  # type: ignore[arg-type]
                facts = await engine_facts(client, slots, max_context, kv_capacity, vocab_size)
                settings = (ProfileSettings.quick(token_budget=token_budget) if quick
                            else ProfileSettings(repeats=repeats, token_budget=token_budget))
                with progress_bar() as bar:
                    task = bar.add_task("profiling", total=None)
                    return await profile_engine(client, model, settings, facts,
                                                lambda msg: bar.update(task, description=msg))

        fitted, report = asyncio.run(run())
        path = out or Path("out/profiles") / f"{model}.yaml"
        fitted.save(path)
        q = fitted.quality
        assert q is not None
        assumed = " (assumes --kv-unified; else pass --kv-capacity)" if kv_capacity is None else ""
        console.print(f"{fitted.device}: {fitted.slots} slots, context {fitted.max_context}, "
                      f"KV {fitted.kv_capacity_tokens} tokens{assumed}; {q.samples} points in {report.wall_s:.1f} s",
                      highlight=False)
        console.print("fit error (mean abs %): " + ", ".join(f"{k} {v:.1f}" for k, v in q.by_kind)
                      + f"; overall {q.mean_abs_pct_error:.1f} (max {q.max_abs_pct_error:.1f}), R² {q.r2:.3f}",
                      highlight=False)
        console.print("cached-prefix speed-up: " + ", ".join(
            f"{p} tokens {s:.1f}×" for p, s in report.cache_speedups.items()), highlight=False)
        console.print(f"profile: {path}", highlight=False, soft_wrap=True)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report.to_dict(fitted), indent=2))
            console.print(f"json: {json_out}", highlight=False)


@app.command()
def serve(
    config: Annotated[Path, typer.Option(help="serving YAML: the cluster (instances with backend sim|openai "
                                              "and url), api_keys, and an optional gateway: section")],
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to bind")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Run the gateway: OpenAI-compatible API and workflows, routed by the scheduler core."""
    with user_errors():
        from flowserve.gateway.server import serve as run_server
        from flowserve.gateway.settings import load_serve_config

        run_server(load_serve_config(config), host, port, log_level)


@app.command()
def validate(
    url: Annotated[str, typer.Option(help="base URL of the OpenAI-compatible engine (no /v1)")],
    profile: Annotated[Path, typer.Option(help="the engine's fitted profile (flowserve profile)")],
    workload: Annotated[str, typer.Option(help="workload YAML, built-in name or recorded .jsonl trace")],
    dispatch: Annotated[str, typer.Option(help="dispatch policy (same in both runs)")] = "round_robin",
    queue: Annotated[str, typer.Option(help="queue policy (same in both runs)")] = "fcfs",
    seed: Annotated[int, typer.Option(help="salt of the replayed token ids (a fresh value avoids the "
                                           "engine's cache of an earlier run)")] = 0,
    vocab_size: Annotated[int | None, typer.Option(help="engine vocabulary (default: reported)")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="section.name=value; sections: workload, dispatch, queue")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the report as JSON")] = None,
) -> None:
    """Replay a workload on a real engine and in the simulator; report the latency error."""
    with user_errors():
        import asyncio

        from flowserve.bench.report import write_json
        from flowserve.calibrate.validate import validate_engine
        from flowserve.config import parse_sets
        from flowserve.sim.run import PolicySpec
        from flowserve.workloads import load_workload

        sets = parse_sets(set_)
        wl = load_workload(workload, sets.get("workload"))
        policy = PolicySpec(dispatch, queue, sets.get("dispatch", {}), sets.get("queue", {}))
        report = asyncio.run(validate_engine(url, str(profile), wl, policy, seed, vocab_size))
        err, hit = report["latency_error_pct"], report["token_hit_rate"]
        console.print(f"{report['compared']} of {report['queries']} queries compared "
                      f"({len(report['failed_live'])} failed live)", highlight=False)
        if err["mean"] is not None:
            console.print(f"latency error: mean {err['mean']:.1f}%, p50 {err['p50']:.1f}%, p90 {err['p90']:.1f}% "
                          f"(goal: mean < 10%); mean latency live {report['mean_latency_s']['live']:.3f} s, "
                          f"sim {report['mean_latency_s']['sim']:.3f} s", highlight=False)
        console.print(f"token hit rate: live {hit['live']:.3f}, sim {hit['sim']:.3f} "
                      f"(difference {hit['diff_points']:+.1f} points)", highlight=False)
        if json_out:
            write_json(json_out, report)
            console.print(f"json: {json_out}")


@bench_app.command("live")
def bench_live(
    json_out: Annotated[Path, typer.Option("--json", help="where to write the results")] = Path(
        "out/bench-live.json"),
    policies: Annotated[str, typer.Option(help="comma-separated dispatch policies; the first is compared "
                                               "with the last")] = "prefix_affinity,round_robin",
    queries: Annotated[int, typer.Option(help="queries of the shared-prefix run per policy")] = 120,
    rate: Annotated[float, typer.Option(help="arrival rate (per second) of the shared-prefix run")] = 3.0,
    overhead_requests: Annotated[int, typer.Option(help="requests of the gateway-overhead run")] = 300,
    parts: Annotated[str, typer.Option(help="comma-separated: overhead, prefix, validate")] = (
        "overhead,prefix,validate"),
) -> None:
    """Live benchmarks: prefix-aware vs round-robin on two llama-servers, gateway overhead
    with simulated engines, and `validate` against llama-server."""
    with user_errors():
        from flowserve.bench.live import run_live_bench

        run_live_bench(json_out, console, [p.strip() for p in policies.split(",") if p.strip()], queries, rate,
                       overhead_requests, {p.strip() for p in parts.split(",")})


def main(argv: list[str] | None = None) -> Any:
    return app(argv)
