"""`flowserve text2sql eval`: execution accuracy, latency and calls per stage of the agent."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import CLUSTER_HELP, PLAIN_HELP, app, console, output_file, user_errors

text2sql_app = typer.Typer(**PLAIN_HELP, help="The Text-to-SQL agent: evaluation.")
app.add_typer(text2sql_app, name="text2sql")


@text2sql_app.command("eval")
def eval_(
    db: Annotated[str, typer.Option(help="the database: a SQLite or DuckDB file, `chinook` or `builtin` (bank)")],
    questions: Annotated[str, typer.Option(help="JSON lines {id, question, gold_sql, difficulty}, or `chinook`")],
    config: Annotated[Path | None, typer.Option(help="serving YAML whose instances serve the agent in-process "
                                                     "(any OpenAI-compatible engine)")] = None,
    gateway: Annotated[str | None, typer.Option(help="URL of a running `flowserve serve` gateway instead")] = None,
    db_name: Annotated[str | None, typer.Option(help="--gateway: the database's name in the gateway's "
                                                     "text2sql settings (default: the file's stem)")] = None,
    api_key: Annotated[str | None, typer.Option(help="--gateway: bearer key")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="questions in flight at once")] = 4,
    limit: Annotated[int | None, typer.Option(min=1, help="only the first N questions")] = None,
    json_out: Annotated[Path | None, output_file("--json", help="write the report as JSON")] = None,
    trace: Annotated[Path | None, output_file(help="record the run in the published trace format "
                                                    "(replay: kind agent_trace; compare: calibrate --trace)")] = None,
) -> None:
    """Run the agent on every question; report execution accuracy against the gold SQL,
    latency, and calls and call latency per stage."""
    with user_errors():
        from flowserve.apps.text2sql.evaluate import load_questions, report_table, summarize
        from flowserve.apps.text2sql.record import write_agent_trace
        from flowserve.bench.text2sql_eval import database_file, eval_gateway, eval_in_process
        from flowserve.errors import ConfigError
        from flowserve.host.settings import load_serve_config

        if (config is None) == (gateway is None):
            raise ConfigError("give exactly one of --config (in-process) and --gateway URL")
        qs = load_questions(questions)[:limit]
        cleanup: list[str] = []
        try:
            path = database_file(db, cleanup)
            if gateway is not None:
                name = db_name or (db if db in ("chinook", "builtin") else Path(path).stem)
                if db == "builtin" and db_name is None:
                    name = "bank"
                outcomes, entries = asyncio.run(eval_gateway(gateway, path, name, qs, api_key, concurrency))
            else:
                assert config is not None
                outcomes, entries = asyncio.run(eval_in_process(load_serve_config(config), db, qs, concurrency))
        finally:
            for d in cleanup:
                shutil.rmtree(d, ignore_errors=True)
        summary = summarize(outcomes)
        console.print(report_table(summary), highlight=False)
        if trace is not None:
            n = write_agent_trace(trace, entries)
            console.print(f"trace: {trace} ({n} queries)", highlight=False)
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(summary, indent=2))
            console.print(f"json: {json_out}", highlight=False)


@text2sql_app.command("simulate")
def simulate_(
    db: Annotated[str, typer.Option(help="the database: a SQLite or DuckDB file, `chinook` or `builtin`")],
    questions: Annotated[str, typer.Option(help="JSON lines with a `question` each, or `chinook`")],
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)],
    rate: Annotated[float, typer.Option(min=1e-6, max=1e6, help="queries per second (Poisson)")] = 1.0,
    seed: Annotated[int, typer.Option(min=0, help="seed of arrivals and modelled outcomes")] = 0,
    dispatch: Annotated[str, typer.Option(help="dispatch policy")] = "round_robin",
    queue: Annotated[str, typer.Option(help="queue policy")] = "fcfs",
    candidates: Annotated[int, typer.Option(min=1, max=16)] = 2,
    max_rounds: Annotated[int, typer.Option(min=0, max=10)] = 3,
    unit_tests: Annotated[int, typer.Option(min=0, max=10)] = 3,
    error_prob: Annotated[float, typer.Option(min=0.0, max=1.0, help="P(an SQL execution fails)")] = 0.3,
    lengths_from: Annotated[str | None, typer.Option(help="a recorded live run (eval --trace): its per-stage "
                                                         "output means model the answers")] = None,
    json_out: Annotated[Path | None, output_file("--json", help="write the result as JSON")] = None,
) -> None:
    """Run the agent's own workflow in the simulator: real prompts (schema, questions),
    modelled answer lengths, SQL errors and tool times."""
    with user_errors():
        import numpy as np

        from flowserve.apps.text2sql.agent import AgentConfig
        from flowserve.apps.text2sql.app import resolve_database
        from flowserve.apps.text2sql.catalog import read_catalog
        from flowserve.apps.text2sql.evaluate import load_questions
        from flowserve.apps.text2sql.modelled import ModelledRun, agent_workload, simulate_agent
        from flowserve.config import load_cluster

        specs = load_cluster(cluster)
        qs = [q.question for q in load_questions(questions)]
        cleanup: list[str] = []
        try:
            catalog = read_catalog(resolve_database("sim", db, cleanup))
        finally:
            for d in cleanup:
                shutil.rmtree(d, ignore_errors=True)
        run = (ModelledRun.from_trace(lengths_from, exec_error_prob=error_prob) if lengths_from
               else ModelledRun(exec_error_prob=error_prob))
        sim = simulate_agent(specs, agent_workload(qs, db, catalog, AgentConfig(candidates, max_rounds, unit_tests),
                                                  run, rate, seed), dispatch, queue)
        done = [q for q in sim.queries if q.failed is None]
        lat = [q.latency for q in done]
        stages: dict[str, int] = {}
        for c in sim.calls:
            stages[c.stage] = stages.get(c.stage, 0) + 1
        report = {"queries": len(sim.queries), "completed": len(done), "failed": len(sim.queries) - len(done),
                  "latency_s": {"mean": float(np.mean(lat)) if lat else None,
                                "p50": float(np.median(lat)) if lat else None,
                                "p99": float(np.percentile(lat, 99)) if lat else None},
                  "calls_per_query": {s: n / len(sim.queries) for s, n in sorted(stages.items())},
                  "makespan_s": sim.makespan}
        console.print_json(json.dumps(report))
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report, indent=2))
