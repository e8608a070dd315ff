"""`flowserve bench live --peer sglang-router`: flowserve against the real SGLang router, live.

The same shared-prefix workload — 8 documents of ~1.5k tokens, each request one of them
plus a short unique question, 16 output tokens, Poisson arrivals — goes over HTTP
through `flowserve serve` (the `flowserve` dispatch and queue, the engines' fitted
profile) and through the `sglang-router` wheel (`cache_aware`, its defaults), each time to
two fresh llama-servers (the project's tiny model, one thread, `-np SLOTS` slot caches,
`--cache-ram 0`). SLOTS is 1 and 4, and flowserve's `max_inflight` is SLOTS; three
repetitions of each, the routers alternating. Figures: client-side mean and p99 latency,
and the engines' hit rate from their `/metrics` (cached / all prompt tokens).

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

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import llama_servers, served
from flowserve.metrics.tables import markdown_table

MODEL = "tiny-llama"
PREFIXES, PREFIX_WORDS, QUESTION_WORDS, OUTPUT = 8, 700, 14, 16  # ~1.5k and ~32 tokens (the tiny vocabulary)
ROUTERS = ("flowserve", "sglang-router")


def prompts(queries: int, seed: int) -> list[str]:
    """Each request: one of PREFIXES documents (drawn uniformly) + a unique question."""
    rng = np.random.default_rng(seed)
    docs = [f"document {k}: " + " ".join(f"w{(k * 31 + i) % 211}" for i in range(PREFIX_WORDS))
            for k in range(PREFIXES)]
    out = []
    for i in range(queries):
        doc = docs[int(rng.integers(PREFIXES))]
        out.append(f"{doc}\nquestion {i}: " + " ".join(f"q{int(rng.integers(997))}" for _ in range(QUESTION_WORDS)))
    return out


def arrivals(queries: int, rate: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed + 1)
    return [float(t) for t in np.cumsum(rng.exponential(1.0 / rate, queries))]


def engine_hits(urls: Sequence[str]) -> dict[str, float]:
    """Cached and computed prompt tokens the engines report on `/metrics` (llama-server)."""
    cached = computed = 0.0
    for url in urls:
        for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
            if line.startswith("llamacpp:prompt_tokens_cached_total "):
                cached += float(line.split()[1])
            elif line.startswith("llamacpp:prompt_tokens_total "):
                computed += float(line.split()[1])
    total = cached + computed
    return {"cached_tokens": cached, "computed_tokens": computed, "hit_rate": cached / total if total else 0.0}


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


def peer_bench(model: Path, binary: Path, profile: Path, out: Path, queries: int, rate: float, reps: int,
               slot_settings: Sequence[int], say: Callable[[str], None]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for slots in slot_settings:
        for rep in range(reps):
            texts, times = prompts(queries, rep), arrivals(queries, rate, rep)
            order = ROUTERS if rep % 2 == 0 else ROUTERS[::-1]  # alternate who runs first
            for name in order:
                say(f"{name}, {slots} slot(s) per server, repetition {rep + 1}: {queries} requests at {rate}/s")
                with llama_servers(2, model, binary, slots, out, MODEL) as servers:
                    urls = [s.base_url for s in servers]
                    with router(name, urls, profile, slots, out) as url:
                        res = asyncio.run(replay(url, texts, times))
                    res.update(engine_hits(urls))
                runs.append({"router": name, "slots": slots, "rep": rep, **res})
    return {"workload": {"queries": queries, "rate": rate, "prefixes": PREFIXES, "output_tokens": OUTPUT},
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
            cell[name] = {k: float(np.mean([r[k] for r in mine])) for k in ("mean_s", "p99_s", "hit_rate")}
            cell[name]["reps"] = len(mine)
        f, s = cell["flowserve"], cell["sglang-router"]
        rows.append({"slots": slots, **cell, "flowserve_better": f["mean_s"] < s["mean_s"] and f["p99_s"] < s["p99_s"]
                     and f["hit_rate"] > s["hit_rate"]})
    return rows


def table(summary: Sequence[dict[str, Any]]) -> str:
    rows = []
    for row in summary:
        for name in ROUTERS:
            c = row[name]
            rows.append([row["slots"], name, c["mean_s"], c["p99_s"], c["hit_rate"], c["reps"]])
    return markdown_table(["slots per server", "router", "mean s", "p99 s", "engine hit rate", "reps"], rows)
