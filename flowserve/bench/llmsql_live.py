"""`flowserve bench llmsql --live`: the same ablation as the simulated bench (`llmsql.py`),
run on real llama-servers with the project's tiny random-weight GGUF, in-process through
the gateway's live driver (`flowserve.sql.live_backend`). Every (query, step) gets fresh
engines (`--cache-ram 0`), so no step inherits another's slot caches. "no cache" sends
`cache_prompt: false`, so the engine recomputes every prompt. Figures: the statement's end
to end (wall clock) and the ENGINE-REPORTED token hit rate (usage
`prompt_tokens_details.cached_tokens`, else llama-server's `timings.cache_n`).

The random model's answers are noise (LLM_CHOICE/LLM_NUMBER rows mostly become NULL plus
an error), and answers are capped at a few tokens: the bench measures prefix reuse and
the calls the planner saves, not answer quality.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import flowserve.sql as fsql
from flowserve.calibrate.validate import engine_instance
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.host.settings import GatewaySettings
from flowserve.metrics.tables import write_json
from flowserve.profiles.fitted import FittedCostModel
from flowserve.profiles.slot_config import SlotConfig
from flowserve.sql.tables import read_table
from flowserve.types.specs import InstanceSpec

SLOTS, CTX_PER_SLOT, MAX_TOKENS = 2, 4096, 4  # per engine; answer tokens per call


@dataclasses.dataclass(frozen=True)
class LiveSetup:
    """Where the engines come from: the binary, the tiny model, a folder for logs/profile."""
    binary: Path
    model: TinyModel
    out: Path
    engines: int = 2
    dispatch: str = "prefix_affinity"


def tiny_profile(path: Path, model: TinyModel, slots: int, ctx: int, slot_config: SlotConfig | None = None) -> Path:
    """A hand-set profile of the tiny model on one CPU thread (orders of magnitude only:
    ~0.1 ms per prefilled token, ~2 ms per decode step); the driver needs one per
    instance for its admission decisions, the planner its slot rules (`slot_config`),
    and the figures come from the engines."""
    FittedCostModel(model.name, (1e-3, 2e-3, 1e-4, 1e-8, 1.5e-3, 1e-7), ctx, ctx, slots,
                    device="llama-server (1 thread)", slot_config=slot_config).save(path)
    return path


@contextlib.contextmanager
def engines(setup: LiveSetup, tag: str) -> Iterator[list[InstanceSpec]]:
    """Fresh llama-servers (empty caches) and their instance specs; stopped on exit."""
    setup.out.mkdir(parents=True, exist_ok=True)
    servers = [LlamaServer(setup.model.gguf, ctx_size=SLOTS * CTX_PER_SLOT, parallel=SLOTS, threads=1, cache_ram=0,
                           alias=setup.model.name, binary=setup.binary, log_path=setup.out / f"{tag}-{i}.log")
               for i in range(setup.engines)]
    profile = tiny_profile(setup.out / "tiny-profile.yaml", setup.model, SLOTS, SLOTS * CTX_PER_SLOT,
                           servers[0].slot_config())
    try:
        for s in servers:
            s.start()
        yield [engine_instance(s.base_url, profile, f"llama{i}") for i, s in enumerate(servers)]
    finally:
        for s in servers:
            s.stop()


def live_step(setup: LiveSetup, sql: str, tables: dict[str, Any], optimize: str, caching: bool,
              tag: str) -> dict[str, Any]:
    settings = GatewaySettings(dispatch=setup.dispatch, dispatch_params={"binding": "late"},
                               tokenizers={setup.model.name: str(setup.model.tokenizer_json)})
    with engines(setup, tag) as specs:
        con = fsql.connect(cluster=specs, optimize=optimize, prefix_caching=caching, max_tokens=MAX_TOKENS,
                           settings=settings)
        try:
            for name, src in tables.items():
                con.register(name, src)
            t0 = time.perf_counter()
            res = con.sql(sql)
            wall = time.perf_counter() - t0
        finally:
            con.close()
    rep = res.report
    return {"latency_s": wall, "llm_s": rep["latency_s"], "token_hit_rate": rep["token_hit_rate"],
            "calls": rep["calls"], "prompt_tokens": rep.get("prompt_tokens", 0),
            "cached_tokens": rep.get("cached_tokens", 0), "rows": len(res.rows), "solver_s": rep.get("solver_s", 0.0),
            "row_errors": rep.get("rows_failed", 0), "plans": sorted({op["plan"] for op in rep["operators"]})}


def head(path: Path, rows: int) -> pa.Table:
    """The first `rows` rows of a CSV, in file order."""
    return read_table("head", path).slice(0, rows)


def run_live(setup: LiveSetup, datasets: dict[str, tuple[dict[str, Any], dict[str, str]]], names: Sequence[str],
             steps: Sequence[tuple[str, str, bool]], say: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for ds, (tables, qset) in datasets.items():
        for name in names:
            if name not in qset:
                continue
            runs = {}
            for label, opt, caching in steps:
                say(f"live {ds}/{name}: {label}")
                runs[label] = live_step(setup, qset[name], tables, opt, caching, f"{ds}-{name}")
            base = runs[steps[0][0]]["latency_s"]
            for r in runs.values():
                r["speedup"] = base / r["latency_s"] if r["latency_s"] else None
            entry: dict[str, Any] = {"steps": runs}
            if "cache+original" in runs:
                orig = runs["cache+original"]["token_hit_rate"]
                entry |= {f"hit_rate_gain_{k}_pts": 100 * (runs[lbl]["token_hit_rate"] - orig)
                          for k, lbl in (("ggr", "+GGR"), ("all", "all")) if lbl in runs}
            results[f"{ds}/{name}"] = entry
    return results


def write_results(results: dict[str, Any], setup: LiveSetup, rows: int, json_out: Path,
                  extra: dict[str, Any] | None = None) -> None:
    write_json(json_out, (extra or {}) | {"setting": {"engines": setup.engines, "slots_per_engine": SLOTS, "threads": 1,
                                      "cache_ram": 0, "model": "tiny random-weight llama (GGUF)",
                                      "dispatch": setup.dispatch, "max_tokens": MAX_TOKENS, "rows": rows},
                          "queries": results})
