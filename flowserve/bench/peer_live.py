"""`flowserve bench live --peer sglang-router`: flowserve against the real SGLang router, live.

The same shared-prefix workload — 8 documents of ~1.5k tokens, each request one of them
plus a short unique question, 16 output tokens, Poisson arrivals — goes over HTTP
through `flowserve serve` (the `flowserve` dispatch and queue, the engines' fitted
profile) and through the `sglang-router` wheel (`cache_aware`, its defaults), each time to
two fresh llama-servers (the project's tiny model, one thread, `-np SLOTS` slot caches,
`--cache-ram 0`). SLOTS is 1 and 4, and flowserve's `max_inflight` is SLOTS; three
repetitions of each, the routers alternating. Figures: client-side mean and p99 latency,
and the engines' hit rate from their `/metrics` (cached / all prompt tokens).

Each live run is followed by its simulated twin (`flowserve.bench.peer_twin`): the same
requests and arrival times through the simulator with the engines' fitted profile, so the
table shows what the simulator predicted beside what was measured — at the profile's
speed, and at the speed the engines reported for the run (their prompt seconds per token). Repetition k draws its
requests from `--seed` + k.

The client is open-loop (requests sent at their arrival times whatever the answers), on
its own event loop in this process; it reports how late it sent requests (`send_lag`),
so a slow client would show.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from flowserve.bench.peer_twin import simulate_twin, tokenize, twin_workload
from flowserve.engines.llamacpp_server import free_port
from flowserve.engines.tinymodel import TinyModel
from flowserve.loadtest.procs import llama_servers, served
from flowserve.metrics.tables import markdown_table

MODEL = "tiny-llama"
PREFIXES, PREFIX_WORDS, QUESTION_WORDS, OUTPUT = 8, 700, 14, 16  # ~1.5k and ~32 tokens (the tiny vocabulary)
ROUTERS = ("flowserve", "sglang-router")
SUMMED = ("mean_s", "p99_s", "hit_rate", "sim_mean_s", "sim_p99_s", "sim_hit_rate", "sim_at_speed_mean_s",
          "engine_speed")


def requests(queries: int, seed: int) -> tuple[list[str], list[int]]:
    """Each request: one of PREFIXES documents (drawn uniformly) + a unique question; the
    prompts and each one's document."""
    rng = np.random.default_rng(seed)
    docs = [f"document {k}: " + " ".join(f"w{(k * 31 + i) % 211}" for i in range(PREFIX_WORDS))
            for k in range(PREFIXES)]
    texts, which = [], []
    for i in range(queries):
        k = int(rng.integers(PREFIXES))
        which.append(k)
        question = " ".join(f"q{int(rng.integers(997))}" for _ in range(QUESTION_WORDS))
        texts.append(f"{docs[k]}\nquestion {i}: {question}")
    return texts, which


def arrivals(queries: int, rate: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed + 1)
    return [float(t) for t in np.cumsum(rng.exponential(1.0 / rate, queries))]


COUNTERS = {"llamacpp:prompt_tokens_cached_total": "cached_tokens", "llamacpp:prompt_tokens_total": "computed_tokens",
            "llamacpp:prompt_seconds_total": "prompt_seconds"}


def engine_hits(urls: Sequence[str]) -> dict[str, float]:
    """Cached and computed prompt tokens, and the seconds spent computing them, that the
    engines report on `/metrics` (llama-server), summed over the engines."""
    out = dict.fromkeys(COUNTERS.values(), 0.0)
    for url in urls:
        for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
            name, _, value = line.partition(" ")
            if name in COUNTERS:
                out[COUNTERS[name]] += float(value)
    total = out["cached_tokens"] + out["computed_tokens"]
    return {**out, "hit_rate": out["cached_tokens"] / total if total else 0.0}


async def replay(url: str, texts: Sequence[str], times: Sequence[float]) -> dict[str, Any]:
    """Send each request at its time (open loop); latencies of the answered ones."""
    lat: list[float] = []
    lags: list[float] = []
    failed = 0
    limits = httpx.Limits(max_connections=len(texts), max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        t0 = time.perf_counter()

        async def one(text: str, at: float) -> None:
            nonlocal failed
            delay = t0 + at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)  # the workload's arrival process, not synchronisation
            start = time.perf_counter()
            lags.append(start - t0 - at)
            try:
                r = await client.post("/v1/completions", json={"model": MODEL, "prompt": text, "max_tokens": OUTPUT,
                                                               "temperature": 0})
                r.raise_for_status()
                lat.append(time.perf_counter() - start)
            except httpx.HTTPError:
                failed += 1

        await asyncio.gather(*(one(t, a) for t, a in zip(texts, times, strict=True)))
    arr = np.asarray(lat or [np.nan])
    return {"mean_s": float(arr.mean()), "p50_s": float(np.percentile(arr, 50)), "p99_s": float(np.percentile(arr, 99)),
            "answered": len(lat), "failed": failed, "send_lag_max_s": max(lags, default=0.0)}


def flowserve_yaml(out: Path, urls: Sequence[str], profile: Path, slots: int) -> Path:
    names = [f"llama{i}" for i in range(len(urls))]
    path = out / f"serve-peer-{slots}.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": n, "profile": str(profile.resolve()), "backend": "openai", "url": u,
                       "max_inflight": slots}
                      for n, u in zip(names, urls, strict=True)],
        "gateway": {"dispatch": "flowserve", "queue": "flowserve", "engine_kinds": dict.fromkeys(names, "llamacpp"),
                    "cache_sequences": dict.fromkeys(names, slots)}}))
    return path


@contextlib.contextmanager
def router(name: str, urls: Sequence[str], profile: Path, slots: int, out: Path) -> Iterator[str]:
    port = free_port()
    if name == "flowserve":
        args = [sys.executable, "-c", "from flowserve.cli import app; app()", "serve", "--config",
                str(flowserve_yaml(out, urls, profile, slots)), "--port", str(port), "--log-level", "warning"]
    else:
        args = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                "--worker-urls", *urls, "--policy", "cache_aware", "--log-level", "warn"]
    with served(args, f"http://127.0.0.1:{port}/health", out / f"{name}-{slots}.log"):
        yield f"http://127.0.0.1:{port}"


def peer_bench(model: TinyModel, binary: Path, profile: Path, out: Path, queries: int, rate: float, reps: int,
               slot_settings: Sequence[int], say: Callable[[str], None], seed: int = 0) -> dict[str, Any]:
    """Each repetition k draws its requests and arrivals from seed + k; each live run is
    followed by its simulated twin (`flowserve.bench.peer_twin`)."""
    out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for slots in slot_settings:
        for rep in range(reps):
            (texts, docs), times = requests(queries, seed + rep), arrivals(queries, rate, seed + rep)
            twin = twin_workload(tokenize(texts, model.tokenizer_json), times, docs, OUTPUT)
            order = ROUTERS if rep % 2 == 0 else ROUTERS[::-1]  # alternate who runs first
            for name in order:
                say(f"{name}, {slots} slot(s) per server, repetition {rep + 1}: {queries} requests at {rate}/s")
                with llama_servers(2, model.gguf, binary, slots, out, MODEL) as servers:
                    urls = [s.base_url for s in servers]
                    with router(name, urls, profile, slots, out) as url:
                        res = asyncio.run(replay(url, texts, times))
                    res.update(engine_hits(urls))
                res.update(simulate_twin(name, twin, profile, slots, res))
                runs.append({"router": name, "slots": slots, "rep": rep, "seed": seed + rep, **res})
    return {"workload": {"queries": queries, "rate": rate, "prefixes": PREFIXES, "output_tokens": OUTPUT,
                         "seeds": [seed + rep for rep in range(reps)]},
            "engines": "2 × llama-server, tiny model, 1 thread, -np SLOTS, --cache-ram 0, fresh per run",
            "runs": runs, "summary": summarize(runs)}


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting and router: the mean over repetitions of mean/p99 latency and hit rate,
    and whether flowserve is better on all three."""
    rows = []
    for slots in sorted({r["slots"] for r in runs}):
        cell = {}
        for name in ROUTERS:
            mine = [r for r in runs if r["slots"] == slots and r["router"] == name]
            cell[name] = {k: float(np.mean([r[k] for r in mine])) for k in SUMMED}
            cell[name]["reps"] = len(mine)
            for key in ("sim", "sim_at_speed"):
                cell[name][f"{key}_error_pct"] = 100.0 * abs(cell[name][f"{key}_mean_s"] / cell[name]["mean_s"] - 1.0)
        f, s = cell["flowserve"], cell["sglang-router"]
        rows.append({"slots": slots, **cell, "flowserve_better": f["mean_s"] < s["mean_s"] and f["p99_s"] < s["p99_s"]
                     and f["hit_rate"] > s["hit_rate"], "mean_ratio": f["mean_s"] / s["mean_s"]})
    return rows


def table(summary: Sequence[dict[str, Any]]) -> str:
    rows = []
    for row in summary:
        for name in ROUTERS:
            c = row[name]
            rows.append([row["slots"], name, c["mean_s"], c["p99_s"], c["hit_rate"], c["reps"], c["sim_mean_s"],
                         c["sim_hit_rate"], f"{c['sim_error_pct']:.0f}%", c["engine_speed"], c["sim_at_speed_mean_s"],
                         f"{c['sim_at_speed_error_pct']:.0f}%"])
    ratios = "; ".join(f"{row['slots']} slot(s): flowserve / sglang-router mean ×{row['mean_ratio']:.2f}"
                       for row in summary)
    return markdown_table(["slots per server", "router", "mean s", "p99 s", "engine hit rate", "reps",
                           "sim mean s", "sim hit rate", "off by", "engine speed ×", "sim at that speed s",
                           "off by"], rows) + "\n" + ratios
