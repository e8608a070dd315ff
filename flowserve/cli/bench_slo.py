"""`flowserve bench slo` and `flowserve bench predictor`: per-request TTFT/TPOT objectives on a
heterogeneous pool, and the latency predictor's candidate models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import bench_app, console, output_folder, user_errors


@bench_app.command("slo")
def bench_slo(
    quick: Annotated[bool, typer.Option("--quick", help="300 requests on two seeds instead of 1,200 on five")] = False,
    seed: Annotated[list[int] | None, typer.Option(help="workload seeds (default 31, 37, 41, 43, 47)")] = None,
    rate: Annotated[float, typer.Option(min=0.1, max=1000, help="requests per second")] = 60.0,
    out: Annotated[Path, output_folder(help="folder for slo.json")] = Path("out/bench-slo"),
) -> None:
    """The share of requests meeting both their TTFT and TPOT objectives on a pool of four GPU
    types: flowserve with its learned latency predictor, without it, and llm-d's
    predicted-latency scheduling, on the same requests (virtual time)."""
    with user_errors():
        from flowserve.bench.slo import SEEDS, run_slo_bench

        run_slo_bench(out, quick, console, tuple(seed) if seed else SEEDS, rate=rate)


@bench_app.command("predictor")
def bench_predictor(
    quick: Annotated[bool, typer.Option("--quick", help="a stream of 300 calls instead of 1,200")] = False,
    seed: Annotated[int, typer.Option(help="workload seed")] = 5,
    out: Annotated[Path, output_folder(help="folder for predictor.json")] = Path("out/bench-predictor"),
) -> None:
    """The latency predictor's candidate models (scikit-learn's SGD, river, LightGBM, the cost
    model alone) on one stream of calls: TTFT/TPOT errors, µs per prediction and per update."""
    with user_errors():
        from flowserve.bench.predictor import run_predictor_bench

        run_predictor_bench(out, quick, console, seed)
