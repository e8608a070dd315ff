"""The HTTP gateway on 127.0.0.1 with simulated engines: the official `openai` client,
errors, headers, workflows, admin, metrics, admission control, graceful shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest
from live_support import MODEL, ScriptedBackend, ext_spec

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.intake.tenancy import query_class
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.tenants import api_keys

KEY = "sk-test-key"
AUTH = {"authorization": f"Bearer {KEY}"}


def sim_config(**gateway: object) -> ServeConfig:
    return serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
        "api_keys": {KEY: {"tenant": "team", "acts_for": ["acme"]}},
        "gateway": {"time_scale": 200.0, "dispatch": "prefix_affinity", "admin_keys": [KEY], **gateway},
    }, "test")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(sim_config())) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def test_openai_client_completions(client: openai.OpenAI) -> None:
    r = client.completions.create(model=MODEL, prompt="select the total amount of loans " * 20, max_tokens=7)
    assert r.object == "text_completion" and r.model == MODEL
    assert r.usage.completion_tokens == 7 and len(r.choices[0].text.split()) == 7
    assert r.usage.prompt_tokens > 100 and r.choices[0].finish_reason == "length"
    token_ids = client.completions.create(model=MODEL, prompt=[5, 6, 7, 8], max_tokens=2)
    assert token_ids.usage.prompt_tokens == 4


def test_openai_client_chat_and_cached_tokens(client: openai.OpenAI) -> None:
    messages = [{"role": "system", "content": "You answer questions about a bank database. " * 30},
                {"role": "user", "content": "How many accounts?"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)
    again = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3)
    assert first.object == "chat.completion" and first.choices[0].message.role == "assistant"
    assert len(first.choices[0].message.content.split()) == 3
    # the second request reuses the first one's prefix on the same (simulated) engine
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1


def test_openai_client_streaming(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=6, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 6
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length" and chunks[-1].usage.completion_tokens == 6
    plain = list(client.completions.create(model=MODEL, prompt="hello", max_tokens=4, stream=True))
    assert len("".join(c.choices[0].text for c in plain).split()) == 4


def test_models_and_health(client: openai.OpenAI, server: BackgroundServer) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok" and health["instances_up"] == 2


def on_loop(gw, coro) -> object:
    """Run a coroutine on the gateway's event loop (another thread) and wait for it."""
    return asyncio.run_coroutine_threadsafe(coro, gw.driver_loop).result(30)


def error_of(resp: httpx.Response) -> dict:
    body = resp.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(("headers", "code"), [({}, "invalid_api_key"),
                                                ({"authorization": "Bearer wrong"}, "invalid_api_key")])
def test_requests_without_a_valid_key_get_401(server: BackgroundServer, headers: dict, code: str) -> None:
    resp = httpx.post(f"{server.url}/v1/completions", json={"model": MODEL, "prompt": "x"}, headers=headers)
    assert resp.status_code == 401 and error_of(resp)["code"] == code
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0).models.list()


def test_bad_requests_get_openai_style_4xx(server: BackgroundServer, client: openai.OpenAI) -> None:
    url = f"{server.url}/v1/completions"
    resp = httpx.post(url, content=b'{"model": ', headers={**AUTH, "content-type": "application/json"})
    assert resp.status_code == 400 and "not valid JSON" in error_of(resp)["message"]
    resp = httpx.post(url, json={"model": "gpt-9", "prompt": "x"}, headers=AUTH)
    assert resp.status_code == 404 and error_of(resp)["code"] == "model_not_found"
    resp = httpx.post(url, json={"model": MODEL}, headers=AUTH)
    assert resp.status_code == 400 and error_of(resp)["param"] == "prompt"
    resp = httpx.post(url, json={"model": MODEL, "prompt": "x", "max_tokens": 0}, headers=AUTH)
    assert resp.status_code == 400 and error_of(resp)["param"] == "max_tokens"
    resp = httpx.post(url, json={"model": MODEL, "prompt": "x"}, headers={**AUTH, "x-slo-ms": "soon"})
    assert resp.status_code == 400 and error_of(resp)["param"] == "x-slo-ms"
    resp = httpx.post(url, json={"model": MODEL, "prompt": "x"}, headers={**AUTH, "x-priority": "high"})
    assert resp.status_code == 400 and error_of(resp)["param"] == "x-priority"
    resp = httpx.post(url, json={"model": MODEL, "prompt": "x"}, headers={**AUTH, "x-flowserve-class": "bulk"})
    assert resp.status_code == 400 and error_of(resp)["param"] == "x-flowserve-class"
    with pytest.raises(openai.BadRequestError) as info:  # llama-3.1-8b: 131072 tokens of context
        client.completions.create(model=MODEL, prompt=list(range(131_000)), max_tokens=500)
    assert info.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    resp = httpx.get(f"{server.url}/v1/nothing-here", headers=AUTH)
    assert resp.status_code == 404 and error_of(resp)["message"]


def test_slo_header_and_tenant_reach_the_metrics(server: BackgroundServer, client: openai.OpenAI) -> None:
    met = client.with_options(default_headers={"x-tenant": "acme", "x-slo-ms": "600000"})
    met.completions.create(model=MODEL, prompt="a b c", max_tokens=2)
    missed = client.with_options(default_headers={"x-tenant": "acme", "x-slo-ms": "0.001"})
    missed.completions.create(model=MODEL, prompt="a b c", max_tokens=2)
    batch = client.with_options(default_headers={"x-flowserve-class": "batch", "x-slo-ms": "0.001"})
    batch.completions.create(model=MODEL, prompt="a b c", max_tokens=2)  # batch: no SLO, tenant from the key
    text = httpx.get(f"{server.url}/metrics").text
    assert 'flowserve_tenant_tokens_total{kind="output",tenant="team"}' in text
    assert 'flowserve_tenant_tokens_total{kind="prompt",tenant="acme"}' in text
    assert KEY not in text
    assert 'flowserve_slo_total{result="met",tenant="acme"} 1.0' in text
    assert 'flowserve_slo_total{result="missed",tenant="acme"} 1.0' in text
    for series in ("flowserve_instance_queue_depth{instance=\"sim-0\"}", "flowserve_instance_inflight",
                   "flowserve_routing_decisions_total{instance=\"sim-", "flowserve_ttft_seconds_bucket",
                   "flowserve_query_latency_seconds_bucket", "flowserve_prefix_hit_estimate_tokens_total",
                   "flowserve_cached_tokens_total"):
        assert series in text, series


def test_workflow_sync_and_async(server: BackgroundServer) -> None:
    url = f"{server.url}/v1/workflows/text2sql"
    body = {"input": {"question": "How many loans are there?", "candidates": 1, "max_rounds": 1}}
    sync = httpx.post(url, json=body, headers=AUTH, timeout=30)
    # simulated engines answer placeholder text: schema selection names no table, so the
    # agent fails the query with its reason (the scripted-engine tests cover success)
    assert sync.status_code == 422
    out = sync.json()
    assert out["status"] == "failed" and error_of(sync)["code"] == "unanswerable"
    assert "no table of database 'bank' can answer the question" in error_of(sync)["message"]
    started = httpx.post(url, json={**body, "async": True}, headers=AUTH)
    assert started.status_code == 202
    qid = started.json()["id"]
    gw = server.app.state.gateway
    on_loop(gw, gw.driver.until(lambda: gw.driver.book.by_ref(qid).done.done()))
    status = httpx.get(f"{server.url}/v1/queries/{qid}", headers=AUTH).json()
    assert status["id"] == qid and status["status"] == "failed" and "no table" in status["reason"]
    assert httpx.get(f"{server.url}/v1/queries/999999", headers=AUTH).status_code == 404
    bad = httpx.post(url, json={"input": {}}, headers=AUTH)
    assert bad.status_code == 400 and "question" in error_of(bad)["message"]
    assert httpx.post(f"{server.url}/v1/workflows/nope", json={}, headers=AUTH).status_code == 404
    names = [w["name"] for w in httpx.get(f"{server.url}/v1/workflows", headers=AUTH).json()["data"]]
    assert "text2sql" in names


def test_admin_adds_and_removes_instances(server: BackgroundServer, client: openai.OpenAI) -> None:
    url = f"{server.url}/admin/instances"
    assert httpx.get(url).status_code == 401
    added = httpx.post(url, json={"name": "extra", "gpu": "H100", "model": MODEL}, headers=AUTH)
    assert added.status_code == 201
    assert "extra" in [i["name"] for i in added.json()["instances"]]
    bad = httpx.post(url, json={"name": "x", "gpu": "TPU", "model": MODEL}, headers=AUTH)
    assert bad.status_code == 400 and "TPU" in error_of(bad)["message"]
    removed = httpx.delete(f"{url}/extra", headers=AUTH)
    assert removed.status_code == 200 and "extra" not in [i["name"] for i in removed.json()["instances"]]
    assert httpx.delete(f"{url}/extra", headers=AUTH).status_code == 404
    assert client.completions.create(model=MODEL, prompt="still served", max_tokens=1).usage.completion_tokens == 1


def test_overload_gets_429_with_retry_after() -> None:
    """One engine held busy: the first request's predicted work exceeds a 0 s bound, so the
    next one is refused at once with Retry-After instead of queueing."""
    engine = ScriptedBackend(ext_spec("slow"))
    hold = asyncio.Event()  # the engine answers only when the test lets it
    engine.gate = hold
    cfg = ServeConfig((engine.spec,), api_keys([KEY]), sim_config(max_queue_s=0.0).gateway)
    app = create_app(cfg, backend_factory=lambda spec, _d: engine)
    with BackgroundServer(app) as srv:
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        with httpx.Client(base_url=srv.url, headers=AUTH, timeout=30) as http:
            first: dict = {}

            def send_first() -> None:
                first["resp"] = http.post("/v1/completions", json={"model": MODEL, "prompt": "x " * 500})

            t = threading.Thread(target=send_first)
            t.start()
            gw = app.state.gateway
            on_loop(gw, gw.driver.until(lambda: gw.driver.open_queries == 1))
            with pytest.raises(openai.RateLimitError) as info:
                c.completions.create(model=MODEL, prompt="y", max_tokens=1)
            assert int(info.value.response.headers["retry-after"]) >= 1
            assert info.value.code == "rate_limit_exceeded"
            gw.driver_loop.call_soon_threadsafe(hold.set)
            t.join(30)
            assert first["resp"].status_code == 200


def test_shutdown_drains_a_request_in_flight() -> None:
    engine = ScriptedBackend(ext_spec("e"))
    hold = asyncio.Event()
    engine.gate = hold
    app = create_app(ServeConfig((engine.spec,), api_keys([KEY]), sim_config().gateway),
                     backend_factory=lambda spec, _d: engine)
    srv = BackgroundServer(app).start()
    result: dict = {}

    def send() -> None:
        result["resp"] = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "p", "max_tokens": 3},
                                    headers=AUTH, timeout=30)

    t = threading.Thread(target=send)
    t.start()
    gw = app.state.gateway
    on_loop(gw, gw.driver.until(lambda: gw.driver.open_queries == 1))
    stopper = threading.Thread(target=srv.stop)
    stopper.start()  # uvicorn stops accepting and waits for the open request

    async def listening_closed() -> None:  # a condition bounded by a deadline, re-checked each loop turn
        async with asyncio.timeout(30):
            while any(s.is_serving() for s in srv.server.servers):
                await asyncio.sleep(0.005)

    on_loop(gw, listening_closed())
    assert gw.driver.open_queries == 1  # the request is still in flight after shutdown began
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "late"}, headers=AUTH)
    gw.driver_loop.call_soon_threadsafe(hold.set)
    t.join(30)
    stopper.join(60)
    assert result["resp"].status_code == 200
    assert result["resp"].json()["usage"]["completion_tokens"] == 3


def test_class_parsing() -> None:
    assert query_class(None) == "interactive" and query_class(" Batch ") == "batch"
    assert query_class("") == "interactive" and query_class("bulk") is None
