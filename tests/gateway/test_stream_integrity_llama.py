"""Stream integrity against real llama-servers (issue 9): the engine serving a stream is
killed after the client saw text; the stream is not re-dispatched to the other engine,
it ends in-band with an error event and `[DONE]`."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from live_support import tiny_profile

from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

MAX_TOKENS = 1500
KEY = "sk-llama"


def serve_file(tmp: Path, servers: list[LlamaServer], profile: Path, **gateway: object) -> Path:
    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": f"llama{i}", "profile": str(profile), "backend": "openai", "url": s.base_url}
                      for i, s in enumerate(servers)],
        "api_keys": [KEY], "gateway": {"retry_backoff_s": 0.02, **gateway}}))
    return path


def test_a_stream_whose_engine_dies_ends_in_band_and_is_not_answered_twice(
        start_llama_server: Callable[..., LlamaServer], tiny_model: TinyModel, tmp_path: Path) -> None:
    servers = [start_llama_server(), start_llama_server()]
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 1)
    cfg = load_serve_config(serve_file(tmp_path, servers, profile, breaker_failures=1, retries=0))
    by_name = {f"llama{i}": s for i, s in enumerate(servers)}
    body = {"model": tiny_model.name, "prompt": "count the loans per district", "max_tokens": MAX_TOKENS,
            "stream": True, "ignore_eos": True}
    with BackgroundServer(create_app(cfg)) as srv, httpx.stream(
            "POST", f"{srv.url}/v1/completions", json=body, headers={"authorization": f"Bearer {KEY}"},
            timeout=120) as resp:
        assert resp.status_code == 200
        victim = by_name[resp.headers["x-flowserve-instance"]]
        events: list[str] = []
        for line in resp.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(line[6:])
            if len(events) == 3:  # the client has seen text: the engine dies now
                os.kill(victim.pid, signal.SIGKILL)
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert "streamed" in error["message"]
    deltas = [json.loads(e) for e in events[:-2]]
    assert all("choices" in d for d in deltas)
    # one partial answer, never a second full one appended (2,005 chunks for 1,500 tokens before)
    assert 3 <= len(deltas) < MAX_TOKENS
