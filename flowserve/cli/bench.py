"""`flowserve bench ...`: benchmarks that print ratios measured side by side and write JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import (
    bench_app,
    console,
    user_errors,
)


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


@bench_app.command("live")
def bench_live(
    json_out: Annotated[Path, typer.Option("--json", help="where to write the results")] = Path(
        "out/bench-live.json"),
    policies: Annotated[str, typer.Option(help="comma-separated dispatch policies; the first is compared "
                                               "with the last")] = "prefix_affinity,round_robin",
    queries: Annotated[int, typer.Option(help="queries of the shared-prefix run per policy")] = 120,
    rate: Annotated[float, typer.Option(help="arrival rate (per second) of the shared-prefix run")] = 3.0,
    overhead_requests: Annotated[int, typer.Option(help="requests of the gateway-overhead run")] = 300,
    parts: Annotated[str, typer.Option(help="comma-separated: overhead, prefix, validate, admission")] = (
        "overhead,prefix,validate,admission"),
) -> None:
    """Live benchmarks: prefix-aware vs round-robin on two llama-servers, gateway overhead
    with simulated engines, and `validate` against llama-server."""
    with user_errors():
        from flowserve.bench.live import run_live_bench

        run_live_bench(json_out, console, [p.strip() for p in policies.split(",") if p.strip()], queries, rate,
                       overhead_requests, {p.strip() for p in parts.split(",")})


@bench_app.command("gateway")
def bench_gateway(
    json_out: Annotated[Path, typer.Option("--json", help="results JSON")] = Path("out/bench-gateway.json"),
    policies: Annotated[str, typer.Option(help="comma-separated dispatch policies (default: all registered)")] = "",
    seconds: Annotated[float, typer.Option(help="seconds of load per cell")] = 2.0,
    workers: Annotated[str, typer.Option(help="comma-separated gateway process counts to measure")] = "1",
    sglang: Annotated[bool, typer.Option(help="measure sglang-router cache_aware (the bench extra)")] = True,
    gateway_src: Annotated[Path | None, typer.Option(help="serve the gateway from this source tree instead "
                                                          "(e.g. `git archive` of an older commit)")] = None,
) -> None:
    """Gateway data plane vs the bare backend and sglang-router: req/s, added latency, CPU."""
    with user_errors():
        from flowserve.bench.gateway_bench import run_gateway_bench
        from flowserve.errors import ConfigError
        from flowserve.policies import DISPATCH_POLICIES

        names = [p.strip() for p in policies.split(",") if p.strip()] or sorted(DISPATCH_POLICIES)
        unknown = sorted(set(names) - set(DISPATCH_POLICIES))
        if unknown:
            raise ConfigError(f"--policies: unknown {unknown}; known: {', '.join(sorted(DISPATCH_POLICIES))}")
        try:
            counts = [int(w) for w in workers.split(",")]
        except ValueError:
            raise ConfigError(f"--workers: expected integers, got {workers!r}") from None
        if seconds <= 0 or any(w < 1 or w > 64 for w in counts):
            raise ConfigError("--seconds must be positive and --workers between 1 and 64")
        run_gateway_bench(json_out, console, names, seconds, counts, sglang, gateway_src=gateway_src)
