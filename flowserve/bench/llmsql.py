"""`flowserve bench llmsql`: the paper's ablation per query type, side by side, simulated
on Llama-3-8B on one L4 (Liu et al. Fig. 3–4): no cache / cache + original order /
+ column reordering (and row sorting) / + GGR / + dedup / all (+ predicate ordering and
prefix warm-up). Figures: the statement's end-to-end time and the engine's token hit rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import flowserve.sql as fsql
from flowserve.metrics.tables import write_json
from flowserve.sql.generators import products, squad_like
from flowserve.sql.queries import MOVIES, MOVIES_CSV, PRODUCTS, RAG

STEPS: list[tuple[str, str, bool]] = [  # (label, optimize, engine prefix caching); sorted rows need the
# prefix warm-up: an engine admits a sorted group in one iteration and computes its prefix once per call
    ("no cache", "none", False),
    ("cache+original", "none", True),
    ("+reorder", "reorder,sort,warmup", True),
    ("+GGR", "ggr,warmup", True),
    ("+dedup", "ggr,dedup,warmup", True),
    ("all", "all", True),
]


def run_step(sql: str, tables: dict[str, Any], optimize: str, caching: bool) -> dict[str, Any]:
    with fsql.connect(cluster="paper-l4", optimize=optimize, prefix_caching=caching) as con:
        for name, src in tables.items():
            con.register(name, src)
        res = con.sql(sql)
    rep = res.report
    return {"latency_s": rep["latency_s"], "token_hit_rate": rep["token_hit_rate"], "calls": rep["calls"],
            "rows": len(res.rows), "solver_s": rep["solver_s"]}


def run_llmsql_bench(names: list[str], rows: int, json_out: Path, console: Console) -> dict[str, Any]:
    qs, docs = squad_like(max(50, rows // 6))
    datasets = {"movies": ({"movies": str(MOVIES_CSV)}, MOVIES),
                "products": ({"products": products(rows)}, PRODUCTS),
                "squad": ({"questions": qs, "documents": docs}, RAG)}
    results: dict[str, Any] = {}
    table = Table(title="LLM-in-SQL on Llama-3-8B / 1×L4 (simulated): time s (speed-up) · token hit rate")
    table.add_column("query")
    for label, _, _ in STEPS:
        table.add_column(label, justify="right")
    for ds, (tables, qset) in datasets.items():
        for name in names:
            if name not in qset:
                continue
            runs = {label: run_step(qset[name], tables, opt, caching) for label, opt, caching in STEPS}
            base = runs["no cache"]["latency_s"]
            for r in runs.values():
                r["speedup"] = base / r["latency_s"] if r["latency_s"] else None
            orig = runs["cache+original"]["token_hit_rate"]
            results[f"{ds}/{name}"] = {"steps": runs,
                                       "hit_rate_gain_ggr_pts": 100 * (runs["+GGR"]["token_hit_rate"] - orig),
                                       "hit_rate_gain_all_pts": 100 * (runs["all"]["token_hit_rate"] - orig)}
            table.add_row(f"{ds}/{name}", *[f"{r['latency_s']:.1f} ({r['speedup']:.2f}×) · {r['token_hit_rate']:.0%}"
                                            for r in runs.values()])
    console.print(table)
    write_json(json_out, results)
    return results


def live_datasets(rows: int) -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    from flowserve.bench.llmsql_live import head

    qs, docs = squad_like(rows, contexts=max(4, rows // 8))
    return {"movies": ({"movies": head(MOVIES_CSV, rows)}, MOVIES),
            "products": ({"products": products(rows)}, PRODUCTS),
            "squad": ({"questions": qs, "documents": docs}, RAG)}


def run_llmsql_live_bench(names: list[str], rows: int, json_out: Path, console: Console,
                          engines: int = 2) -> dict[str, Any]:
    """The ablation on `engines` llama-servers (tiny random-weight GGUF), in one run."""
    from flowserve.bench.llmsql_live import LiveSetup, run_live, write_results
    from flowserve.engines.llamacpp_build import ensure_llama_server
    from flowserve.engines.tinymodel import write_tiny_llama

    out = Path("out/bench-llmsql-live")  # engine logs and the tiny GGUF, never next to the results
    binary = ensure_llama_server(progress=lambda m: console.print(f"[llama-server] {m}", highlight=False))
    setup = LiveSetup(binary, write_tiny_llama(out / "tiny.gguf"), out, engines=engines)
    results = run_live(setup, live_datasets(rows), names, STEPS,
                       lambda m: console.print(f"[dim]{m}[/dim]", highlight=False))
    table = Table(title=f"LLM-in-SQL live on {engines}× llama-server (tiny GGUF, {rows} rows): "
                        "wall s (speed-up vs no cache) · engine token hit rate · calls")
    table.add_column("query")
    for label, _, _ in STEPS:
        table.add_column(label, justify="right")
    for key, entry in results.items():
        table.add_row(key, *[f"{r['latency_s']:.2f} ({r['speedup']:.2f}×) · {r['token_hit_rate']:.0%} · {r['calls']}"
                             for r in entry["steps"].values()])
    console.print(table)
    write_results(results, setup, rows, json_out)
    return results
