"""`flowserve bench explain` (where two dispatch policies' decisions differ, and what it cost)
and `flowserve bench kv-events` (the engines' cache events as the dispatch's view)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import bench_app, console, output_file, user_errors


@bench_app.command("explain")
def bench_explain(
    workload: Annotated[str, typer.Option(help="one of bench compare's workloads")] = "tool_use",
    policy: Annotated[list[str] | None, typer.Option(
        help="the two contestants, A then B: a label of bench compare, or DISPATCH[+QUEUE] (a name, an import "
             "path or a scoring profile's file)")] = None,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    queries: Annotated[int, typer.Option(min=1, help="interactive queries")] = 150,
    scale: Annotated[float, typer.Option(min=0.1, help="the SLO scale both run at (deadlines: scale × the query "
                                                       "alone)")] = 4.0,
    json_out: Annotated[Path, output_file("--json", help="where to write the report")] = Path(
        "out/bench-explain.json"),
) -> None:
    """Two dispatch policies on the same arrivals: where their decisions diverge and what each divergence cost
    (prefix left for load, re-prefilled tokens, queueing and prefill seconds)."""
    with user_errors():
        from flowserve.errors import ConfigError
        from flowserve.metrics.tables import write_json
        from flowserve.sim.compare import contestants
        from flowserve.sim.explain import explain
        from flowserve.workloads.mixes import MIXED, SINGLE

        cases = {**SINGLE, **MIXED}
        if workload not in cases:
            raise ConfigError(f"--workload: unknown {workload!r}; known: {', '.join(cases)}")
        picked = contestants(policy)
        if len(policy or ()) != 2 or len(picked) != 2:
            raise ConfigError("--policy: give exactly two different contestants, A then B")
        (la, a), (lb, b) = picked.items()
        report = explain(cases[workload], queries, seed, scale, a, b, (la, lb))
        for label, p in report["policies"].items():
            console.print(f"{label}: attainment {p['attainment']:.3f} at scale {scale:g}, mean latency "
                          f"{p['latency_mean_s']:.2f} s, TTFT p90 {p['ttft_p90_s']:.2f} s, token hit rate "
                          f"{p['token_hit_rate']:.3f}; decisions {p['decisions']}", highlight=False)
        console.print(f"{report['matched_calls']} calls matched", highlight=False)
        for line in report["findings"]:
            console.print(f"* {line}", highlight=False)
        write_json(json_out, report)
        console.print(f"json: {json_out}")


@bench_app.command("kv-events")
def bench_kv_events(
    quick: Annotated[bool, typer.Option("--quick", help="a third of the queries, 2·10⁵ blocks of churn")] = False,
    vllm_python: Annotated[Path | None, typer.Option(help="also vLLM CPU with KV events: its venv's Python")] = None,
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path(
        "out/bench-kv-events.json"),
    seed: Annotated[int, typer.Option(help="the simulated workload's seed")] = 1,
    queries: Annotated[int | None, typer.Option(min=1, help="simulated queries (default 900; --quick 300)")] = None,
    simulated_only: Annotated[bool, typer.Option("--simulated-only", help="only the simulated comparison")] = False,
) -> None:
    """The engines' KV-cache events as the prefix view: precise vs estimated vs the peers under cache pressure
    (simulated), index memory under churn, /health under a flood (timed only on an idle machine), and vLLM CPU's
    reported cached tokens against flowserve's prediction (`--vllm-python`)."""
    with user_errors():
        from flowserve.bench.kv_events import kv_events_cli

        kv_events_cli(quick, vllm_python, json_out, console, seed, queries, simulated_only)
