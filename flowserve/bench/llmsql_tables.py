"""`flowserve bench llmsql --tables ...`: the paper's query types on real public tables
(`flowserve.sql.real_tables`), side by side in one run: none, each optimisation alone,
and all — the statement's time and the engine's token hit rate, simulated on
Llama-3-8B on one L4 (or `--live` on llama-servers), with the issue's goals checked:
`all` ≥ `none` on hit rate and time everywhere, ≥ 2× mean speed-up, ≥ +18 points mean
hit-rate gain on tables whose own order is not already grouped."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import flowserve.sql as fsql
from flowserve.metrics.tables import write_json
from flowserve.sql.queries import REAL
from flowserve.sql.real_tables import TABLES, real_tables

STEPS: list[tuple[str, str, bool]] = [(name, name, True) for name in
                                      ("none", "dedup", "reorder", "ggr", "sort", "predicates", "warmup", "all")]
# whether the table's own order already groups the rows its statements share prefixes on
GROUPED = {"airports": False, "weather": False, "cars": True, "penguins": True, "subdivisions": True,
           "languages": False}
GOAL_SPEEDUP, GOAL_GAIN_PTS = 2.0, 18.0


def table_names(spec: str) -> list[str]:
    names = list(TABLES) if spec.strip().lower() == "all" else [t.strip() for t in spec.split(",") if t.strip()]
    bad = [t for t in names if t not in TABLES]
    if bad or not names:
        from flowserve.sql.errors import SQLInputError
        raise SQLInputError(f"--tables: unknown table(s) {bad}; known: all, {', '.join(TABLES)}")
    return names


def run_step(sql: str, tables: dict[str, Any], optimize: str) -> dict[str, Any]:
    with fsql.connect(cluster="paper-l4", optimize=optimize) as con:
        for name, src in tables.items():
            con.register(name, src)
        res = con.sql(sql)
    rep = res.report
    plans = sorted({op["plan"] for op in rep["operators"]})
    return {"latency_s": rep["latency_s"], "token_hit_rate": rep["token_hit_rate"], "calls": rep["calls"],
            "rows": len(res.rows), "solver_s": rep["solver_s"], "plans": plans}


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals over every (table, statement) measured."""
    entries = list(results.values())
    if not entries:
        return {}
    losses = [k for k, e in results.items()
              if e["steps"]["all"]["latency_s"] > e["steps"]["none"]["latency_s"] * (1 + 1e-9)
              or e["steps"]["all"]["token_hit_rate"] < e["steps"]["none"]["token_hit_rate"] - 1e-9]
    speedups = [e["speedup_all"] for e in entries]
    gains = [e["hit_gain_all_pts"] for e in entries if not e["grouped"]]
    mean_speedup = sum(speedups) / len(speedups)
    geomean = math.exp(sum(math.log(x) for x in speedups) / len(speedups))
    mean_gain = sum(gains) / len(gains) if gains else None
    return {"all_never_below_none": {"met": not losses, "losses": losses},
            "mean_speedup": {"value": mean_speedup, "goal": GOAL_SPEEDUP, "met": mean_speedup >= GOAL_SPEEDUP,
                             "geometric_mean": geomean},
            "mean_hit_gain_pts_ungrouped": {"value": mean_gain, "goal": GOAL_GAIN_PTS,
                                            "met": mean_gain is not None and mean_gain >= GOAL_GAIN_PTS}}


def summarise(key: str, runs: dict[str, dict[str, Any]], grouped: bool) -> dict[str, Any]:
    none, best = runs["none"], runs["all"]
    for r in runs.values():
        r["speedup"] = none["latency_s"] / r["latency_s"] if r["latency_s"] else None
    return {"steps": runs, "grouped": grouped, "speedup_all": best["speedup"],
            "hit_gain_all_pts": 100 * (best["token_hit_rate"] - none["token_hit_rate"])}


def render(console: Console, title: str, results: dict[str, Any], steps: Sequence[str], g: dict[str, Any]) -> None:
    table = Table(title=title)
    table.add_column("table/query")
    for label in steps:
        table.add_column(label, justify="right")
    table.add_column("plan (all)")
    for key, e in results.items():
        table.add_row(key, *[f"{r['latency_s']:.1f} ({r['speedup']:.2f}×) {r['token_hit_rate']:.0%}"
                             for r in e["steps"].values()], ",".join(e["steps"]["all"].get("plans", [])))
    console.print(table)
    for name, v in g.items():
        console.print(f"goal {name}: {'met' if v['met'] else 'NOT met'} "
                      f"{ {k: x for k, x in v.items() if k != 'met'} }", highlight=False)


def run_tables_bench(names: Sequence[str], queries: Sequence[str], json_out: Path, console: Console,
                     say: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for t in names:
        tables = real_tables(t)
        for q in queries:
            if q not in REAL[t]:
                continue
            say(f"{t}/{q}")
            runs = {label: run_step(REAL[t][q], tables, opt) for label, opt, _ in STEPS}
            results[f"{t}/{q}"] = summarise(f"{t}/{q}", runs, GROUPED[t])
    g = goals(results)
    render(console, "LLM-in-SQL on real tables, Llama-3-8B / 1×L4 (simulated; answers modelled): "
                    "time s (speed-up vs none) token hit rate", results, [s for s, _, _ in STEPS], g)
    write_json(json_out, {"setting": {"cluster": "paper-l4", "answers": "modelled"}, "goals": g, "queries": results})
    return results


def run_tables_live(names: Sequence[str], queries: Sequence[str], rows: int, json_out: Path, console: Console,
                    engines: int = 2) -> dict[str, Any]:
    """The same on `engines` llama-servers (tiny random-weight GGUF): the first `rows`
    rows of each table in its own order; steps none, ggr and all."""
    from flowserve.bench.llmsql_live import LiveSetup, run_live, write_results
    from flowserve.engines.llamacpp_build import ensure_llama_server
    from flowserve.engines.tinymodel import write_tiny_llama

    out = Path("out/bench-llmsql-live")
    binary = ensure_llama_server(progress=lambda m: console.print(f"[llama-server] {m}", highlight=False))
    setup = LiveSetup(binary, write_tiny_llama(out / "tiny.gguf"), out, engines=engines)
    datasets = {t: ({n: tb.slice(0, rows) if n == t else tb for n, tb in real_tables(t).items()}, REAL[t])
                for t in names}
    steps = [s for s in STEPS if s[0] in ("none", "ggr", "all")]
    results = run_live(setup, datasets, queries, steps, lambda m: console.print(f"[dim]{m}[/dim]", highlight=False))
    for key, e in results.items():
        results[key] = summarise(key, e["steps"], GROUPED[key.split("/")[0]])
    g = goals(results)
    render(console, f"LLM-in-SQL live on {engines}× llama-server (tiny GGUF, first {rows} rows): wall s "
                    "(speed-up vs none) engine token hit rate", results, [s for s, _, _ in steps], g)
    write_results(results, setup, rows, json_out, extra={"goals": g})
    return results
