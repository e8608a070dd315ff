"""Simulated engines behind real HTTP: an OpenAI completion with vLLM's usage, the prefix
cache the simulator models (a repeated prompt is served from it), bad input a 400."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served


def test_two_instances_answer_and_cache_what_they_served(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    spec = tmp_path / "engines.json"
    spec.write_text(json.dumps({"time_scale": 50, "instances": [
        {"name": f"e{i}", "gpu": "A100-80G", "model": "llama-3.1-8b", "port": p} for i, p in enumerate(ports)]}))
    url = f"http://127.0.0.1:{ports[1]}"
    with served([sys.executable, "-m", "flowserve.engines.sim_server", str(spec)], f"{url}/health",
                tmp_path / "engines.log"):
        prompt = list(range(100, 612))
        first = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 5}, timeout=30).json()
        again = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 5}, timeout=30).json()
        assert first["usage"]["completion_tokens"] == 5 and first["usage"]["prompt_tokens"] == 512
        assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= 496  # its blocks, from the cache
        other = httpx.post(f"http://127.0.0.1:{ports[0]}/v1/completions", json={"prompt": prompt, "max_tokens": 5},
                           timeout=30).json()
        assert other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # another engine, its own cache
        streamed = httpx.post(f"{url}/v1/completions", json={"prompt": "hello there", "max_tokens": 3,
                                                             "stream": True}, timeout=30)
        assert streamed.text.rstrip().endswith("data: [DONE]")
        assert httpx.post(f"{url}/v1/completions", json={"prompt": []}, timeout=30).status_code == 400
        assert httpx.post(f"{url}/v1/completions", content=b"{nope", timeout=30).status_code == 400
