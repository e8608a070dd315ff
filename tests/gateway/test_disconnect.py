"""A client that leaves cancels its work (issue 27, item 17): the engine call is aborted,
the slot goes to the next queued query, and the query ends failed with the reason — for
a plain request, a stream, and a workflow."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest
from live_support import MODEL, ScriptedBackend, ext_spec, poll_until

from flowserve.apps.base import WorkflowDef
from flowserve.apps.single import SingleCall
from flowserve.gateway.app import create_app
from flowserve.gateway.disconnect import REASON
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.tenants import api_keys

KEY = "sk-test-key"
ONE = WorkflowDef("one", "one LLM call", lambda inputs, _settings, model: SingleCall("completion", (1, 2, 3), 4,
                                                                                       model))


@pytest.fixture
def held() -> Iterator[tuple[BackgroundServer, ScriptedBackend]]:
    """A gateway with one engine of one slot whose calls wait until released."""
    engine = ScriptedBackend(ext_spec("e", max_inflight=1))
    gateway = serve_config({"instances": [{"name": "x", "gpu": "A100-80G", "model": MODEL}]}, "t").gateway
    app = create_app(ServeConfig((engine.spec,), api_keys([KEY]), gateway), backend_factory=lambda spec, _d: engine,
                     workflows={"one": ONE})
    with BackgroundServer(app) as srv:
        yield srv, engine


def hold(srv: BackgroundServer, engine: ScriptedBackend) -> None:
    import asyncio

    loop = srv.app.state.gateway.driver_loop
    asyncio.run_coroutine_threadsafe(_set_gate(engine), loop).result(10)


async def _set_gate(engine: ScriptedBackend) -> None:
    import asyncio

    engine.gate = asyncio.Event()


def release(srv: BackgroundServer, engine: ScriptedBackend) -> None:
    assert engine.gate is not None
    srv.app.state.gateway.driver_loop.call_soon_threadsafe(engine.gate.set)


def raw_request(srv: BackgroundServer, path: str, body: dict) -> socket.socket:
    """Send a request on a raw connection (the test closes it to leave mid-request)."""
    data = json.dumps(body).encode()
    sock = socket.create_connection((srv.host, srv.port))
    sock.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: "
                 f"application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
    return sock


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/completions", {"model": MODEL, "prompt": "first", "max_tokens": 8}),
    ("/v1/completions", {"model": MODEL, "prompt": "first", "max_tokens": 8, "stream": True}),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "first"}], "stream": True}),
])
def test_a_client_that_leaves_aborts_its_call_and_frees_the_slot(held, path: str, body: dict) -> None:
    srv, engine = held
    hold(srv, engine)
    sock = raw_request(srv, path, body)
    poll_until(lambda: engine.started == 1, 30, "the first call reached the engine")
    out: dict = {}

    def second() -> None:  # queued behind the first: the instance has one slot
        out["resp"] = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "second"},
                                 headers={"authorization": f"Bearer {KEY}"}, timeout=30)

    t = threading.Thread(target=second)
    t.start()
    poll_until(lambda: srv.app.state.gateway.driver.open_queries == 2, 30, "the second query is queued")
    assert engine.started == 1
    sock.close()  # the first client leaves
    poll_until(lambda: engine.cancelled, 30, "the first call was aborted")
    first = engine.calls[0].id
    assert engine.cancelled == [first]
    poll_until(lambda: engine.started == 2, 30, "the second call got the slot")
    release(srv, engine)
    t.join(30)
    assert out["resp"].status_code == 200
    gone = srv.app.state.gateway.driver.query(engine.calls[0].query_id)
    assert gone is not None and gone.done.result().status == "failed"
    assert gone.done.result().reason == REASON


def test_a_workflow_whose_client_leaves_is_cancelled(held) -> None:
    srv, engine = held
    hold(srv, engine)
    sock = raw_request(srv, "/v1/workflows/one", {"input": {"prompt": "hello"}})
    poll_until(lambda: engine.started == 1, 30, "the workflow's call reached the engine")
    sock.close()
    poll_until(lambda: engine.cancelled, 30, "the workflow's call was aborted")
    driver = srv.app.state.gateway.driver
    poll_until(lambda: driver.open_queries == 0, 30, "the workflow query ended")
    assert driver.query(engine.calls[0].query_id).done.result().reason == REASON


def test_an_async_workflow_is_not_cancelled_when_its_client_leaves(held) -> None:
    srv, engine = held
    resp = httpx.post(f"{srv.url}/v1/workflows/one", json={"input": {"prompt": "hello"}, "async": True},
                      headers={"authorization": f"Bearer {KEY}"}, timeout=30)
    assert resp.status_code == 202
    poll_until(lambda: httpx.get(f"{srv.url}{resp.json()['url']}", headers={"authorization": f"Bearer {KEY}"})
               .json()["status"] == "completed", 30, "the async query completed")
    assert engine.cancelled == []
