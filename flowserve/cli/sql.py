"""`flowserve sql "SELECT ..."` and `flowserve bench llmsql`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from flowserve.cli.common import app, bench_app, console, err_console, output_file, user_errors


def _progress_line(stats: Any) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r  rows {stats.rows} · calls {stats.calls} · hit rate {stats.hit_rate:.0%}   ")
        sys.stderr.flush()


@app.command("sql")
def sql_command(
    statement: Annotated[str, typer.Argument(help="the statement, or Q1..Q5 for the paper's queries")],
    table: Annotated[list[str] | None, typer.Option("--table", help="name=path.csv|parquet (repeatable)")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="cluster YAML or built-in name (paper-l4: Llama-3-8B on one L4)")] = None,
    gateway: Annotated[str | None, typer.Option(help="URL of a running gateway (OpenAI API)")] = None,
    optimize: Annotated[str, typer.Option(
        help="none | all | list of dedup,reorder,ggr,sort,predicates,warmup")] = "all",
    on_error: Annotated[str, typer.Option(help="null (NULL + llm_error column) | fail")] = "null",
    cache: Annotated[str | None, output_file(help="result cache file (SQLite), reused across statements")] = None,
    seed: Annotated[int, typer.Option(help="seed of simulated answers")] = 0,
    json_out: Annotated[Path | None, output_file("--json", help="write rows and the report here")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="show the plan; call no engine")] = False,
    limit: Annotated[int, typer.Option(help="rows to print")] = 20,
) -> None:
    """Run a SQL statement whose LLM(), LLM_FILTER(), LLM_NUMBER(), LLM_CHOICE(), LLM_JSON()
    calls run on a flowserve cluster through the prefix-aware planner."""
    with user_errors():
        import flowserve.sql as fsql
        from flowserve.sql.errors import StatementCancelled
        from flowserve.sql.queries import query as named_query
        from flowserve.sql.tables import parse_table_arg

        if statement.strip().upper() in ("Q1", "Q2", "Q3", "Q4", "Q5"):
            statement = named_query(statement.strip())
        if cluster is None and gateway is None:
            cluster = "paper-l4"
        con = fsql.connect(cluster=cluster, gateway=gateway, optimize=optimize, on_error=on_error,
                           cache=cache, seed=seed, on_progress=_progress_line)
        try:
            for t in table or ():
                con.register(*parse_table_arg(t))
            if explain:
                plan = con.explain(statement)
                for op in plan:
                    console.print(op)
                if json_out:
                    json_out.parent.mkdir(parents=True, exist_ok=True)
                    json_out.write_text(json.dumps({"explain": plan}, indent=2))
                return
            try:
                res = con.sql(statement)
            except KeyboardInterrupt:
                raise StatementCancelled("cancelled (Ctrl-C): outstanding LLM calls were cancelled; "
                                         "no result was written") from None
            if sys.stderr.isatty():
                sys.stderr.write("\n")
        finally:
            con.close()
        console.print(" | ".join(res.columns), highlight=False)
        for row in res.rows[:limit]:
            console.print(" | ".join("NULL" if v is None else str(v)[:80] for v in row), highlight=False)
        if len(res.rows) > limit:
            console.print(f"... {len(res.rows) - limit} more rows")
        rep = res.report
        err_console.print(f"{len(res.rows)} rows · {rep.get('calls', 0)} calls · token hit rate "
                          f"{rep.get('token_hit_rate', 0):.1%} · {rep.get('latency_s', 0):.2f} s on the cluster · "
                          f"{len(rep['errors'])} row errors", highlight=False)
        for e in rep["errors"][:5]:
            err_console.print(f"  {e}", highlight=False)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps({"columns": res.columns, "rows": [list(r) for r in res.rows],
                                            "report": rep}, indent=2, default=str))


@bench_app.command("llmsql")
def bench_llmsql(
    rows: Annotated[int, typer.Option(help="rows of the generated products table")] = 3000,
    queries: Annotated[str, typer.Option(help="query types")] = "Q1,Q2,Q3,Q4,Q5",
    json_out: Annotated[Path | None, output_file("--json")] = None,
    live: Annotated[bool, typer.Option("--live", help="run on real llama-servers (tiny GGUF) instead")] = False,
    engines: Annotated[int, typer.Option(min=1, max=4, help="llama-servers in --live")] = 2,
) -> None:
    """Per query type: no cache / cache + original order / + reorder / + GGR / + dedup / all,
    end-to-end time and token hit rate, simulated on Llama-3-8B on one L4 (or --live on
    llama-servers with the tiny GGUF; use a few hundred rows there)."""
    with user_errors():
        names = [q.strip().upper() for q in queries.split(",") if q.strip()]
        if live:
            from flowserve.bench.llmsql import run_llmsql_live_bench

            run_llmsql_live_bench(names, rows, json_out or Path("out/bench-llmsql-live.json"), console, engines)
            return
        from flowserve.bench.llmsql import run_llmsql_bench

        run_llmsql_bench(names, rows, json_out or Path("out/bench-llmsql.json"), console)
