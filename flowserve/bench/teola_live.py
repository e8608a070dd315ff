"""`flowserve bench teola --live`: Teola's apps on real engines and real components.

Two llama-servers (the project's tiny random-weight model, 1 thread, 2 slots each) serve
the LLM steps; WordLlama embeds, usearch indexes and searches, the reranker reranks, and
the BM25 search service (its own process, over a small built-in corpus) answers web
searches. Per app, the same queries (fixed seed, Poisson arrivals at a low rate) run on
the gateway's `LiveDriver` in-process as the module chain (`passes none`, FCFS) and as
all passes + `topology` batching, one after the other in one run. The tiny model's text
is random, so every LLM step decodes exactly its `max_tokens` (`ignore_eos`): both arms
do the same work and only when the steps run differs.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.apps.teola_served import ADVANCED_RAG, NAIVE_RAG, SEARCH_GEN
from flowserve.calibrate.validate import engine_instance
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import write_tiny_llama
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.settings import GatewaySettings
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.profiles.fitted import FittedCostModel
from flowserve.profiles.ops import op_profile
from flowserve.retrieval.process import SAMPLE_CORPUS as CORPUS
from flowserve.retrieval.process import SearchServiceProcess, write_corpus
from flowserve.types.specs import InstanceSpec

ARMS: tuple[tuple[str, str, str], ...] = (("module chain", "none", "fcfs"), ("all + topology", "all", "topology"))
SEARCH_KEY = "sk-bench-search"
QUESTIONS = ("Which volcano is in Sicily?", "What makes bread dough rise?", "Why do satellites stay in orbit?",
             "What causes spring tides?", "How is espresso made?", "How do glaciers carve valleys?")
# small shapes: every arm decodes the same tokens; RAG chunks of 24 words (≈ one topic each)
SETTINGS: dict[str, dict[str, int]] = {
    "search_gen": {"n_queries": 3, "results": 2, "max_tokens": 16, "query_tokens": 8},
    "naive_rag": {"top_k": 2, "chunk": 24, "overlap": 4, "max_tokens": 16},
    "advanced_rag": {"n_queries": 3, "per_query": 4, "top_k": 2, "chunk": 24, "overlap": 4, "max_tokens": 16,
                     "query_tokens": 8},
}
# every LLM step writes lines of two lowercase words (GBNF, never complete, so `ignore_eos`
# still decodes exactly max_tokens): the random model's text then always splits into the
# expanded queries' lines, and each line is a searchable query
GRAMMAR = 'root ::= (w " " w "\\n")+\nw ::= [a-z]{1,10}'
LLM_PARAMS = {"ignore_eos": True, "grammar": GRAMMAR}
WORKFLOWS = {"search_gen": SEARCH_GEN, "naive_rag": NAIVE_RAG, "advanced_rag": ADVANCED_RAG}


@dataclass(frozen=True)
class LiveSetup:
    """What one live run talks to: the engines' instances and the search service."""
    llm: tuple[InstanceSpec, ...]
    search_url: str
    search_key: str = SEARCH_KEY


def op_specs(search_url: str) -> list[InstanceSpec]:
    return [InstanceSpec(f"{kind}-0", "", kind, kind=kind, op_profile=op_profile(kind),
                         url=search_url if kind == "search" else None)
            for kind in ("embedding", "reranker", "vector_db", "search")]


def tiny_profile(path: Path, name: str, slots: int, ctx: int) -> Path:
    """A hand-set profile of the tiny model on one CPU thread (orders of magnitude:
    ~0.1 ms per prefilled token, ~2 ms per decode step); it only steers the cost model."""
    FittedCostModel(name, (1e-3, 2e-3, 1e-4, 1e-8, 1.5e-3, 1e-7), ctx, ctx, slots,
                    device="llama-server (1 thread)").save(path)
    return path


def arrivals(n: int, rate: float, seed: int) -> list[float]:
    """Poisson arrival times (s) of `n` queries at `rate` per second."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, n)
    return [float(t) for t in np.cumsum(gaps) - gaps[0]]


def inputs_of(app: str, i: int) -> dict[str, str]:
    q = QUESTIONS[i % len(QUESTIONS)]
    return {"question": q} if app == "search_gen" else {"question": q, "document": "\n\n".join(CORPUS.values())}


async def run_arm(setup: LiveSetup, app: str, passes: str, queue: str, times: Sequence[float]) -> dict[str, Any]:
    wf = WORKFLOWS[app]
    prepared = wf.prepare(SETTINGS[app])
    d = LiveDriver([*setup.llm, *op_specs(setup.search_url)],
                   GatewaySettings(passes=passes, queue=queue,
                                   retrieval={"search_key": setup.search_key, "search_timeout_s": 10.0}))
    await d.start()

    async def one(i: int, at: float, t0: float) -> tuple[float, str | None, int]:
        await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
        program = wf.build(inputs_of(app, i), prepared, None)
        program.llm_params = LLM_PARAMS
        start = time.perf_counter()
        r = await d.run(app, program)
        return (time.perf_counter() - start, None if r.status == "completed" else r.reason,
                # engine calls only: a streamed part (`expand[0]`) reports its share of its source
                sum(c.output_tokens for c in r.calls if "[" not in c.node))

    try:
        # warm-up query (loads WordLlama and the tokenizer; not counted)
        warm = wf.build(inputs_of(app, 0), prepared, None)
        warm.llm_params = LLM_PARAMS
        await d.run(app, warm)
        t0 = time.perf_counter()
        done = await asyncio.gather(*(one(i, at, t0) for i, at in enumerate(times)))
    finally:
        await d.shutdown()
    lat = [t for t, err, _ in done if err is None]
    errors = sorted({err for _, err, _ in done if err is not None})
    return {"passes": passes, "queue": queue, "completed": len(lat), "failed": len(done) - len(lat),
            "errors": errors[:3], "output_tokens_per_query": statistics.fmean(c for _, _, c in done),
            "mean_s": statistics.fmean(lat) if lat else float("nan"),
            "p99_s": float(np.percentile(lat, 99)) if lat else float("nan")}


def run_apps(setup: LiveSetup, apps: Sequence[str], queries: int, rate: float, seed: int,
             echo: Callable[[str], None]) -> dict[str, Any]:
    """Both arms of every app against `setup`; per app the ratio module chain / optimised."""
    times = arrivals(queries, rate, seed)
    report: dict[str, Any] = {}
    for app in apps:
        runs = {}
        for label, passes, queue in ARMS:
            echo(f"{app}: {label} ({queries} queries at {rate}/s)")
            runs[label] = asyncio.run(run_arm(setup, app, passes, queue, times))
        base, best = runs[ARMS[0][0]], runs[ARMS[-1][0]]
        report[app] = {"runs": runs, "settings": SETTINGS[app],
                       "mean_speedup": base["mean_s"] / best["mean_s"], "p99_speedup": base["p99_s"] / best["p99_s"]}
        rows = [[label, r["passes"], r["queue"], f"{r['mean_s']:.3f}", f"{r['p99_s']:.3f}", r["completed"],
                 r["failed"], f"{r['output_tokens_per_query']:.1f}"] for label, r in runs.items()]
        echo(markdown_table(["variant", "passes", "queue", "mean s", "p99 s", "ok", "failed", "out tokens/query"],
                            rows))
        echo(f"{app} live: all passes + topology vs module chain: mean {report[app]['mean_speedup']:.2f}×, "
             f"p99 {report[app]['p99_speedup']:.2f}×")
    return report


def run_teola_live(out: Path, apps: Sequence[str], queries: int, rate: float, seed: int,
                   echo: Callable[[str], None], binary: Path, slots: int = 2) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    tiny = write_tiny_llama(out / "tiny.gguf")
    ctx = 2048
    profile = tiny_profile(out / "tiny-profile.yaml", tiny.name, slots, ctx)
    corpus = write_corpus(out / "corpus", CORPUS)
    servers = [LlamaServer(tiny.gguf, ctx_size=ctx * slots, parallel=slots, threads=1, alias=tiny.name,
                           binary=binary, log_path=out / f"llama-{i}.log") for i in range(2)]
    try:
        for s in servers:
            s.start()
        with SearchServiceProcess([corpus], key=SEARCH_KEY, log_path=out / "search.log") as svc:
            setup = LiveSetup(tuple(engine_instance(s.base_url, profile, f"llama{i}") for i, s in enumerate(servers)),
                              svc.url)
            apps_report = run_apps(setup, apps, queries, rate, seed, echo)
    finally:
        for s in servers:
            s.stop()
    report = {"engines": f"2 × llama-server, 1 thread, -np {slots}, tiny random Llama; WordLlama, usearch, "
                         "reranker, BM25 search service", "queries": queries, "rate": rate, "seed": seed,
              "apps": apps_report}
    write_json(out / "teola-live.json", report)
    echo(f"json: {out / 'teola-live.json'}")
    return report
