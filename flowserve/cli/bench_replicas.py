"""`flowserve bench replicas`: replicas sharing one Redis against one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import bench_app, console, output_folder, user_errors


@bench_app.command("replicas")
def bench_replicas(
    quick: Annotated[bool, typer.Option("--quick", help="fewer queries (a few minutes in all)")] = False,
    parts: Annotated[str, typer.Option(help="comma-separated: sim, scale, flood, kill, outage, cost")] = (
        "sim,scale,flood,kill,outage,cost"),
    rate: Annotated[float, typer.Option(min=0.1, max=1000, help="queries per simulated second")] = 12.0,
    time_scale: Annotated[float, typer.Option(min=0.1, max=100, help="simulated seconds per real second of the "
                                                                     "live engines")] = 1.0,
    outage_s: Annotated[float, typer.Option(min=1, max=600, help="outage part: seconds Redis is stopped")] = 10.0,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    out: Annotated[Path, output_folder(help="folder for the JSON and the processes' logs")] = Path(
        "out/bench-replicas"),
) -> None:
    """Replicas sharing one Redis against one process, simulated and live: hit rate, latency,
    exact program summaries, tenant shares, a replica killed, Redis stopped, the cost of sharing."""
    with user_errors():
        from flowserve.bench.replicas import run_replicas_bench

        names = [p.strip() for p in parts.split(",") if p.strip()]
        run_replicas_bench(out, quick, console, names, seed, time_scale, rate, outage_s)
