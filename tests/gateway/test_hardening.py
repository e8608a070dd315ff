"""Issue 9's gateway defects, one regression test each: hostile bodies get a 4xx JSON
error (never a 500), a 500 says `Connection: close`, streams name their instance, a
stream that showed text is never answered twice, and a drain answers what it cuts."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Iterator

import httpx
import pytest
from live_support import MODEL, ext_spec

from flowserve.engines.backend import CallOutcome, EngineRequest
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.tenants import api_keys
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

KEY = "sk-test-key"
AUTH = {"authorization": f"Bearer {KEY}"}


def sim_config(**gateway: object) -> ServeConfig:
    return serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                         "api_keys": [KEY], "gateway": {"time_scale": 200.0, **gateway}}, "test")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(sim_config())) as srv:
        yield srv


def error_of(resp: httpx.Response) -> dict:
    assert resp.headers["content-type"].startswith("application/json")
    return resp.json()["error"]


@pytest.mark.parametrize(("route", "body", "needle"), [
    ("/v1/completions", b'{"model": "m", "prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}", "JSON"),
    ("/v1/completions", b'{"model": "m", "prompt": "x", "logit_bias": ' + b'{"a":' * 900 + b"1" + b"}" * 901,
     "deeper"),
    ("/v1/completions", b'{"model": "%s", "prompt": "ab\\ud800cd"}' % MODEL.encode(), "surrogate"),
    ("/v1/chat/completions", b'{"model": "%s", "messages": [{"role": "user", "content": "\\udc00"}]}'
     % MODEL.encode(), "surrogate"),
    ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": [
        {"role": "user", "content": [{"type": "text", "text": 42}]}]}).encode(), "text"),
    ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}).encode(), "image_url"),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": [2**40]}).encode(), "token ids"),
])
def test_hostile_bodies_get_a_4xx_and_keep_the_connection(server: BackgroundServer, route: str, body: bytes,
                                                          needle: str) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        resp = http.post(route, content=body, headers={"content-type": "application/json"})
        assert resp.status_code == 400, resp.text
        assert needle in error_of(resp)["message"]
        # the same pooled connection serves the next request
        ok = http.post("/v1/completions", json={"model": MODEL, "prompt": "fine", "max_tokens": 1})
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 1


def test_a_500_says_connection_close_and_the_next_request_succeeds() -> None:
    app = create_app(sim_config())

    async def broken(*_a: object) -> None:
        raise RuntimeError("a bug")

    with BackgroundServer(app) as srv, httpx.Client(base_url=srv.url, headers=AUTH, timeout=30) as http:
        real = app.routes.handle
        app.routes.handle = broken
        resp = http.post("/v1/completions", json={"model": MODEL, "prompt": "x"})
        assert resp.status_code == 500 and resp.headers["connection"] == "close"
        assert error_of(resp)["code"] == "internal_error"
        app.routes.handle = real
        assert http.post("/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1}).status_code == 200


def test_streams_carry_the_instance_header(server: BackgroundServer) -> None:
    body = {"model": MODEL, "prompt": "hello there", "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, headers=AUTH, timeout=30) as resp:
        assert resp.headers["x-flowserve-instance"] in {"sim-0", "sim-1"}
        lines = [x for x in resp.iter_lines() if x.startswith("data:")]
    assert lines[-1] == "data: [DONE]" and len(lines) == 5


class HalfStream:
    """Streams one delta, then hangs until cancelled (an engine dying mid-answer)."""

    def __init__(self, spec: InstanceSpec) -> None:
        self.spec = spec
        self.tokenizer = None
        self.calls: list[int] = []
        self.cancelled: list[int] = []
        self.streaming = 0
        self.progress: asyncio.Event | None = None  # set at every delta sent (on the gateway's loop)

    def begin(self, call: LLMCall, req: EngineRequest) -> Awaitable[CallOutcome]:
        return asyncio.ensure_future(self._run(call, req))

    async def _run(self, call: LLMCall, req: EngineRequest) -> CallOutcome:
        self.calls.append(call.id)
        if req.sink is not None:
            req.sink.push(f"part-of-{self.spec.name} ")
        self.streaming += 1
        if self.progress is not None:
            self.progress.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(call.id)
            raise
        raise AssertionError("unreachable")

    async def probe(self) -> bool:
        return True

    async def aclose(self) -> None:
        pass


async def until_engines(engines: list[HalfStream], n: int) -> None:
    """Wait (bounded) until the engines started `n` calls between them."""
    progress = asyncio.Event()
    for e in engines:
        e.progress = progress
    async with asyncio.timeout(30):
        while sum(e.streaming for e in engines) < n:
            progress.clear()
            await progress.wait()


def stream_events(srv: BackgroundServer, out: dict) -> None:
    body = {"model": MODEL, "prompt": "p", "max_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{srv.url}/v1/completions", json=body, headers=AUTH, timeout=30) as resp:
        out["status"] = resp.status_code
        out["lines"] = [x[6:] for x in resp.iter_lines() if x.startswith("data: ")]


def test_a_stream_that_sent_text_is_not_redispatched_when_its_instance_goes() -> None:
    """Instance a goes down mid-stream (here: removed): the core moves the call, the
    driver refuses to restart it on b and the client gets one in-band error and [DONE]."""
    engines = {n: HalfStream(ext_spec(n)) for n in ("a", "b")}
    cfg = ServeConfig(tuple(e.spec for e in engines.values()), api_keys([KEY]),
                      sim_config(dispatch="round_robin").gateway)
    app = create_app(cfg, backend_factory=lambda spec, _d: engines[spec.name])
    with BackgroundServer(app) as srv:
        gw = app.state.gateway
        out: dict = {}
        t = threading.Thread(target=stream_events, args=(srv, out))
        t.start()
        asyncio.run_coroutine_threadsafe(until_engines(list(engines.values()), 1), gw.driver_loop).result(30)
        first = next(n for n, e in engines.items() if e.calls)
        asyncio.run_coroutine_threadsafe(gw.driver.remove_instance(first), gw.driver_loop).result(30)
        t.join(30)
    other = "b" if first == "a" else "a"
    assert out["status"] == 200 and out["lines"][-1] == "[DONE]"
    texts = [json.loads(x)["choices"][0]["text"] for x in out["lines"][:-1] if "choices" in x]
    assert texts == [f"part-of-{first} "]  # nothing from the other instance
    assert engines[other].calls == []
    err = json.loads(out["lines"][-2])["error"]
    assert "streamed" in err["message"]


def test_drain_deadline_answers_503_json_and_ends_streams_in_band() -> None:
    engine = HalfStream(ext_spec("e"))
    cfg = ServeConfig((engine.spec,), api_keys([KEY]), sim_config(drain_timeout_s=0.3).gateway)
    app = create_app(cfg, backend_factory=lambda spec, _d: engine)
    srv = BackgroundServer(app).start()
    gw = app.state.gateway
    plain: dict = {}
    streamed: dict = {}

    def send_plain() -> None:
        plain["resp"] = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "q"},
                                   headers=AUTH, timeout=30)

    threads = [threading.Thread(target=send_plain), threading.Thread(target=stream_events, args=(srv, streamed))]
    for t in threads:
        t.start()
    asyncio.run_coroutine_threadsafe(until_engines([engine], 2), gw.driver_loop).result(30)
    srv.stop()
    for t in threads:
        t.join(30)
    resp = plain["resp"]
    assert resp.status_code == 503 and "drain timeout" in error_of(resp)["message"]
    assert streamed["lines"][-1] == "[DONE]"
    assert "drain timeout" in json.loads(streamed["lines"][-2])["error"]["message"]
    assert sorted(engine.cancelled) == sorted(engine.calls)  # the engine calls were stopped
