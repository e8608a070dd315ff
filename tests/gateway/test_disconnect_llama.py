"""A client that leaves stops the engine (issue 27, item 17), against a real llama-server:
its `/slots` shows the slot idle again within a bound, having decoded a small part of
the 16,000 tokens asked for (its `n_decode_total` counter), for a stream and for a plain
request (llama-server notices a closed connection within its 1 s polling of non-streamed
requests, later on a loaded machine)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from live_support import poll_until, tiny_profile

from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.disconnect import REASON
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

CTX = 16384
MAX_TOKENS = 16_000
IDLE_BOUND_S = 20.0


@pytest.fixture
def served(start_llama_server: Callable[..., LlamaServer], tiny_model: TinyModel,
           tmp_path: Path) -> Iterator[tuple[BackgroundServer, LlamaServer]]:
    engine = start_llama_server(ctx_size=CTX)
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 1, ctx=CTX)
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"instances": [{"name": "llama", "profile": str(profile), "backend": "openai",
                                                   "url": engine.base_url}]}))
    with BackgroundServer(create_app(load_serve_config(path))) as srv:
        yield srv, engine


def processing(engine: LlamaServer) -> bool:
    return any(s["is_processing"] for s in httpx.get(f"{engine.base_url}/slots", timeout=10).json())


def decoded(engine: LlamaServer) -> int:
    metrics = httpx.get(f"{engine.base_url}/metrics", timeout=10).text
    return int(float(next(x.split()[1] for x in metrics.splitlines() if x.startswith("llamacpp:n_decode_total"))))


def assert_cancelled(srv: BackgroundServer, engine: LlamaServer) -> None:
    # polled gently: llama-server checks a non-streamed request's connection only when
    # its result queue stays quiet for a while, and every /slots request is a task there
    poll_until(lambda: not processing(engine), IDLE_BOUND_S, "the engine's slot is idle again", every_s=0.25)
    assert decoded(engine) < MAX_TOKENS // 4  # it stopped early: it did not just finish fast
    driver = srv.app.state.gateway.driver
    poll_until(lambda: driver.open_queries == 0, 10, "the query ended")
    [gone] = [h for h in driver.book.finished.values()]
    assert gone.done.result().reason == REASON


def test_a_stream_whose_client_leaves_frees_the_engine_slot(served, tiny_model: TinyModel) -> None:
    srv, engine = served
    body = {"model": tiny_model.name, "prompt": "count the loans", "max_tokens": MAX_TOKENS, "stream": True,
            "ignore_eos": True}
    with httpx.stream("POST", f"{srv.url}/v1/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        deltas = []
        lines = resp.iter_lines()  # held: dropping the iterator would close the connection already
        for line in lines:
            if line.startswith("data: "):
                deltas.append(json.loads(line[6:]))
            if len(deltas) == 3:  # the client saw text: it leaves when the block ends
                break
        assert all("choices" in d for d in deltas) and processing(engine)
    assert_cancelled(srv, engine)


def test_a_plain_request_whose_client_leaves_frees_the_engine_slot(served, tiny_model: TinyModel) -> None:
    srv, engine = served
    data = json.dumps({"model": tiny_model.name, "prompt": "count the loans", "max_tokens": MAX_TOKENS,
                       "ignore_eos": True}).encode()
    with socket.create_connection((srv.host, srv.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(data), data))
        poll_until(lambda: processing(engine), 30, "the engine is generating", every_s=0.05)
    assert_cancelled(srv, engine)
