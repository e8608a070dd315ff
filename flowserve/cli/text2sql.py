"""`flowserve text2sql eval`: execution accuracy, latency and calls per stage of the agent."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import app, console, user_errors

text2sql_app = typer.Typer(no_args_is_help=True, help="The Text-to-SQL agent: evaluation.")
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
    json_out: Annotated[Path | None, typer.Option("--json", help="write the report as JSON")] = None,
    trace: Annotated[Path | None, typer.Option(help="record the run in the published trace format "
                                                    "(replay: kind agent_trace; compare: calibrate --trace)")] = None,
) -> None:
    """Run the agent on every question; report execution accuracy against the gold SQL,
    latency, and calls and call latency per stage."""
    with user_errors():
        from flowserve.apps.text2sql.evaluate import load_questions, report_table, summarize
        from flowserve.apps.text2sql.record import write_agent_trace
        from flowserve.bench.text2sql_eval import database_file, eval_gateway, eval_in_process
        from flowserve.errors import ConfigError
        from flowserve.gateway.settings import load_serve_config

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
