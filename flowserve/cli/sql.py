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


def _write_json(path: Path, data: dict[str, Any]) -> None:
    from flowserve.sql.errors import SQLInputError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, default=str))
    except OSError as e:
        raise SQLInputError(f"--json {path}: cannot write: {e.strerror or e}") from None


@app.command("sql")
def sql_command(
    statement: Annotated[str, typer.Argument(help="the statement, or Q1..Q5 for the paper's queries")],
    table: Annotated[list[str] | None, typer.Option("--table", help="name=path.csv|parquet (repeatable)")] = None,
    cluster: Annotated[str | None, typer.Option(
        help="cluster YAML or built-in name (paper-l4: Llama-3-8B on one L4, simulated)")] = None,
    gateway: Annotated[str | None, typer.Option(help="URL of a running gateway (OpenAI API)")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", envvar="FLOWSERVE_API_KEY", help="the gateway's API key (or FLOWSERVE_API_KEY)")] = None,
    query_class: Annotated[str, typer.Option(
        "--class", help="batch (no SLO, fills idle capacity) | interactive")] = "batch",
    optimize: Annotated[str, typer.Option(
        help="none | all | list of dedup,reorder,ggr,sort,predicates,warmup")] = "all",
    on_error: Annotated[str, typer.Option(help="null (NULL + llm_error column) | fail")] = "null",
    cache: Annotated[str | None, output_file(help="result cache file (SQLite), reused across statements")] = None,
    seed: Annotated[int, typer.Option(help="seed of simulated answers")] = 0,
    json_out: Annotated[Path | None, output_file(
        "--json", help="write rows and the report (or the plan) here")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="show every candidate plan's estimate and the choice; runs no statement, calls no engine")
    ] = False,
    limit: Annotated[int, typer.Option(min=0, help="rows to print")] = 20,
    chat: Annotated[bool, typer.Option("--chat", help="send each row's prompt as a user message in the model's "
                                                      "chat template (instruct models)")] = False,
) -> None:
    """Run a SQL statement whose LLM(), LLM_FILTER(), LLM_NUMBER(), LLM_CHOICE(), LLM_JSON()
    calls run on a flowserve cluster through the prefix-aware planner.

    The statement runs in an embedded DuckDB with full power over this machine's files
    (read_csv, COPY ... TO, ATTACH), as your own local run; the Python API, simulated
    workloads and services run statements sandboxed (only registered tables, nothing written).
    On a simulated cluster the answers are modelled, not generated."""
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
                           cache=cache, seed=seed, on_progress=_progress_line, api_key=api_key,
                           query_class=query_class, external_access=True, chat=chat)  # type: ignore[arg-type]
        try:
            for t in table or ():
                con.register(*parse_table_arg(t))
            if explain:
                from flowserve.sql.explain import explain_text

                plan = con.explain(statement)
                console.print(explain_text(plan, cluster or "the paper's L4 (the gateway's engines are unknown)"),
                              highlight=False, markup=False)
                if json_out:
                    _write_json(json_out, {"explain": plan})
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
        _print_result(res, limit)
        if json_out:
            _write_json(json_out, {"columns": res.columns, "rows": [list(r) for r in res.rows], "report": res.report})
        rep = res.report
        if rep["rows_failed"] and rep["rows_failed"] >= rep["rows_planned"]:
            first = rep["errors"][0]
            err_console.print(f"[bold red]error:[/] every row failed ({rep['rows_failed']}): {first['reason']}",
                              highlight=False)
            raise typer.Exit(1)


def _print_result(res: Any, limit: int) -> None:
    console.print(" | ".join(res.columns), highlight=False, markup=False)
    for row in res.rows[:limit]:
        console.print(" | ".join("NULL" if v is None else str(v)[:80] for v in row), highlight=False, markup=False)
    if len(res.rows) > limit:
        console.print(f"... {len(res.rows) - limit} more rows")
    rep = res.report
    modelled = " · answers MODELLED (simulated cluster)" if rep.get("answers") == "modelled" else ""
    plans = ", ".join(sorted({op["plan"] for op in rep["operators"]})) or "-"
    err_console.print(f"{len(res.rows)} rows · {rep.get('calls', 0)} calls · token hit rate "
                      f"{rep.get('token_hit_rate', 0):.1%} · {rep.get('latency_s', 0):.2f} s on the cluster · "
                      f"plan {plans} · {rep['rows_failed']} row errors{modelled}", highlight=False, markup=False)
    for g in rep["errors"][:5]:
        err_console.print(f"  {g['op']}: {g['reason']} — {g['rows']} rows, e.g. {'; '.join(g['examples'])}",
                          highlight=False, markup=False)


@bench_app.command("llmsql")
def bench_llmsql(
    rows: Annotated[int, typer.Option(min=1, help="rows of the generated table (with --tables and --live: "
                                                  "the first rows of each table)")] = 3000,
    queries: Annotated[str, typer.Option(help="query types")] = "Q1,Q2,Q3,Q4,Q5",
    tables: Annotated[str | None, typer.Option(
        help="real tables: all, or a list of airports,weather,cars,penguins,subdivisions,languages")] = None,
    json_out: Annotated[Path | None, output_file("--json")] = None,
    live: Annotated[bool, typer.Option("--live", help="run on real llama-servers (tiny GGUF) instead")] = False,
    engines: Annotated[int, typer.Option(min=1, max=4, help="llama-servers in --live")] = 2,
) -> None:
    """Per query type: none / each optimisation alone / all (with --tables, on real public
    tables), end-to-end time and token hit rate, simulated on Llama-3-8B on one L4 (answers
    modelled), or --live on llama-servers with the tiny GGUF (use a few hundred rows there)."""
    with user_errors():
        names = [q.strip().upper() for q in queries.split(",") if q.strip()]
        if tables is not None:
            from flowserve.bench.llmsql_tables import run_tables_bench, run_tables_live, table_names

            chosen = table_names(tables)
            if live:
                run_tables_live(chosen, names, rows, json_out or Path("out/bench-llmsql-tables-live.json"), console,
                                engines)
            else:
                run_tables_bench(chosen, names, json_out or Path("out/bench-llmsql-tables.json"), console,
                                 lambda m: err_console.print(f"[dim]{m}[/dim]", highlight=False))
            return
        if live:
            from flowserve.bench.llmsql import run_llmsql_live_bench

            run_llmsql_live_bench(names, rows, json_out or Path("out/bench-llmsql-live.json"), console, engines)
            return
        from flowserve.bench.llmsql import run_llmsql_bench

        run_llmsql_bench(names, rows, json_out or Path("out/bench-llmsql.json"), console)


@bench_app.command("llmsql-reorder")
def bench_llmsql_reorder(
    url: Annotated[str, typer.Option(help="base URL of the engine (llama-server with a real model; no /v1)")],
    profile: Annotated[Path, typer.Option(help="the engine's profile (flowserve profile)")],
    rows: Annotated[int, typer.Option(min=1, max=1000, help="reviews of the shipped movie table")] = 40,
    json_out: Annotated[Path | None, output_file("--json")] = Path("out/bench-llmsql-reorder.json"),
) -> None:
    """How often the planner's reordering of a row's fields changes a real model's answer:
    one LLM_CHOICE statement in the statement's field order and in the planner's, greedy."""
    with user_errors():
        from flowserve.bench.llmsql_reorder import reorder_effect, review_rows
        from flowserve.calibrate.validate import engine_instance
        from flowserve.metrics.tables import write_json

        data = reorder_effect([engine_instance(url, profile)], review_rows(rows))
        console.print(f"{data['changed']} of {data['rows']} answers changed when the planner reordered the fields "
                      f"({100 * data['changed_share']:.0f}%)", highlight=False)
        for transition, n in data["transitions"].items():
            console.print(f"  {transition}: {n}", highlight=False)
        if json_out:
            write_json(json_out, data)
            console.print(f"json: {json_out}", highlight=False)
