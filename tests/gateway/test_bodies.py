"""Request bodies (issue 27, item 8): a body above `gateway.max_body_bytes` is refused
with a 413 JSON error on every route — declared or chunked — and a large body under the
limit is parsed and tokenized off the event loop, so `/health` keeps its latency while
it is processed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import GatewaySettings, serve_config

KEY = "sk-body"
AUTH = {"authorization": f"Bearer {KEY}"}
LIMIT = 64 * 1024


def served(**gateway: object) -> BackgroundServer:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "api_keys": [KEY], "gateway": {"time_scale": 1e4, **gateway}}, "test")
    return BackgroundServer(create_app(cfg))


@pytest.fixture(scope="module")
def small() -> Iterator[BackgroundServer]:
    with served(max_body_bytes=LIMIT) as srv:
        yield srv


def test_the_default_limit_fits_a_million_token_prompt() -> None:
    assert GatewaySettings().max_body_bytes == 16 << 20
    million_ids = len(json.dumps({"model": MODEL, "prompt": list(range(100_000, 1_100_000))}))
    assert million_ids < GatewaySettings().max_body_bytes


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/v1/workflows/text2sql",
                                  "/admin/instances"])
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_limit_gets_a_413_json_error(small: BackgroundServer, path: str, chunked: bool) -> None:
    body = json.dumps({"model": MODEL, "prompt": "x" * (LIMIT + 10)}).encode()
    content = iter([body[i:i + 8192] for i in range(0, len(body), 8192)]) if chunked else body
    with httpx.Client(base_url=small.url, headers=AUTH, timeout=30) as http:
        resp = http.post(path, content=content, headers={"content-type": "application/json"})
        assert resp.status_code == 413, resp.text
        err = resp.json()["error"]
        assert err["code"] == "request_too_large" and f"{LIMIT} bytes" in err["message"]
        ok = http.post("/v1/completions", json={"model": MODEL, "prompt": "short", "max_tokens": 2})
        assert ok.status_code == 200


def test_health_keeps_its_latency_while_a_large_body_is_processed() -> None:
    words = "count the loans per district " * (15_000_000 // 30)  # 15 MB of text: seconds of tokenizing
    body = json.dumps({"model": MODEL, "prompt": words, "max_tokens": 2}).encode()
    out: dict = {}
    with served() as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        def big() -> None:
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=120) as own:
                start = time.monotonic()
                out["resp"] = own.post("/v1/completions", content=body, headers={"content-type": "application/json"})
                out["took"] = time.monotonic() - start

        t = threading.Thread(target=big)
        t.start()
        latencies = []
        while t.is_alive():
            start = time.monotonic()
            assert http.get("/health").status_code == 200
            latencies.append(time.monotonic() - start)
        t.join()
    assert out["resp"].status_code == 400 and "maximum context length" in out["resp"].text  # it was processed
    assert len(latencies) >= 3, latencies  # /health was answered while the body was processed
    # on the event loop, one /health would wait for most of the processing: a share of the request's
    # own time, never an absolute bound (issue 44 item 13)
    assert max(latencies) < out["took"] / 3, (max(latencies), out["took"])


def test_a_chat_of_too_many_messages_is_refused_before_any_work() -> None:
    """Issue 35 item 5: 50,000 two-word messages (1.8 MB) held /health for seconds and ended in a
    context-length 400 anyway; the message count is the cheap limit, checked first."""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "two words"}] * 50_000}
    with served() as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=None) as http:
        resp = http.post("/v1/chat/completions", json=chat)
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "messages"
        assert "50000 messages" in resp.json()["error"]["message"] and "gateway.max_messages" in resp.text
        resp = http.post("/v1/chat/completions", json={**chat, "messages": chat["messages"][:2], "max_tokens": 10**6})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "max_tokens"
        assert resp.json()["error"]["code"] == "context_length_exceeded"


def test_a_chat_of_too_many_tools_is_refused_before_any_work() -> None:
    """Issue 44 item 4: 2,000 tools (1.8 MB) were answered after 31-60 s of per-tool work.
    The tool count is the cheap limit, checked first; 128 tools (OpenAI's limit) are served."""
    def tool(i: int) -> dict:
        return {"type": "function", "function": {"name": f"tool_{i}", "description": "look something up " * 20,
                                                 "parameters": {"type": "object", "properties": {
                                                     f"arg_{k}": {"type": "string", "description": "x" * 40}
                                                     for k in range(8)}}}}

    chat = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "which tool?"}],
            "tools": [tool(i) for i in range(2000)]}
    with served() as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=None) as http:
        resp = http.post("/v1/chat/completions", json=chat)
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "tools", resp.text
        assert "tools: 2000 tools; at most 128 in one request (gateway.max_tools)" in resp.json()["error"]["message"]
        resp = http.post("/v1/chat/completions", json={**chat, "tools": chat["tools"][:128]})
        assert resp.status_code == 200, resp.text


def test_health_answers_while_a_long_chat_is_laid_out_and_tokenized() -> None:
    """Issue 35 item 5: the chat's turns were built, laid out (quadratically) and hashed on
    the event loop. No deadline here: every wait is for the answer itself, and what is
    compared is /health's longest wait against the big request's own processing time."""
    turn = "count the loans per district " * 170  # 5 KB: 2,048 of them (gateway.max_messages) are 10 MB
    body = json.dumps({"model": MODEL, "max_tokens": 2,
                       "messages": [{"role": "user", "content": turn}] * 2048}).encode()
    out: dict = {}
    with served() as srv, httpx.Client(base_url=srv.url, timeout=None) as http:
        http.get("/health")  # the connection is open before the clock starts

        def big() -> None:
            with httpx.Client(base_url=srv.url, headers=AUTH, timeout=None) as own:
                start = time.monotonic()
                out["resp"] = own.post("/v1/chat/completions", content=body,
                                       headers={"content-type": "application/json"})
                out["took"] = time.monotonic() - start

        t = threading.Thread(target=big)
        t.start()
        waits = []
        while t.is_alive():
            start = time.monotonic()
            assert http.get("/health").status_code == 200
            waits.append(time.monotonic() - start)
        t.join()
    assert out["resp"].status_code == 400 and "maximum context length" in out["resp"].text  # it was processed
    assert len(waits) >= 3, waits  # /health was answered while the chat was processed
    # on the loop, one wait would be nearly all of it; off the loop, the longest is what a loaded
    # machine's scheduling gives (a third of it seen at load 5: hence not a tighter bound)
    assert max(waits) < 0.6 * out["took"], (max(waits), out["took"])
