"""Request heads (issue 35 item 14): a header the gateway reads once is refused when sent
twice, a head over the size or count limit gets a 431, and a connection that does not
send its request head in time is closed — but never one whose request is being answered."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.gateway.asgi import SINGLE, repeated
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

KEY = "sk-heads"
BODY = json.dumps({"model": MODEL, "prompt": "one two", "max_tokens": 2}).encode()


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}], "api_keys": [KEY],
                        "gateway": {"time_scale": 1.0, "header_timeout_s": 0.5}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv


def exchange(server: BackgroundServer, data: bytes) -> bytes:
    """Send `data`, read until the server closes the connection (the socket's timeout only
    guards the test from hanging)."""
    with socket.create_connection((server.host, server.port), timeout=60) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def request(*headers: str, body: bytes = BODY) -> bytes:
    lines = ["POST /v1/completions HTTP/1.1", "host: x", "content-type: application/json", "connection: close",
             f"content-length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize("name", ["authorization", "x-flowserve-program", "x-tenant", "x-slo-ms"])
def test_a_header_read_once_is_refused_when_sent_twice(server: BackgroundServer, name: str) -> None:
    value = {"authorization": f"Bearer {KEY}", "x-flowserve-program": "p", "x-tenant": "key-1",
             "x-slo-ms": "1000"}[name]
    headers = [("authorization", f"Bearer {KEY}")] if name != "authorization" else []
    r = httpx.post(f"{server.url}/v1/completions", content=BODY,
                   headers=[*headers, (name, value), (name, "other")])
    assert r.status_code == 400 and r.json()["error"]["param"] == name and "more than once" in r.text
    r = httpx.get(f"{server.url}/v1/models", headers=[("authorization", f"Bearer {KEY}")] * 2)
    assert r.status_code == 400 and r.json()["error"]["param"] == "authorization"
    r = httpx.post(f"{server.url}/v1/completions", content=BODY, headers=[*headers, (name, value)])
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("head", [(f"x-big: {'a' * 1_000_000}",), tuple(f"x-h{i}: v" for i in range(10_000))],
                         ids=["a 1 MB header", "10,000 headers"])
def test_an_oversized_head_gets_a_431_and_the_connection_closes(server: BackgroundServer, head: tuple) -> None:
    out = exchange(server, request(f"authorization: Bearer {KEY}", *head))
    status, _, rest = out.partition(b"\r\n")
    assert status == b"HTTP/1.1 431 Request Header Fields Too Large", out[:200]
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"]["code"] == "request_header_fields_too_large"
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_connections_that_send_no_head_in_time_are_closed(server: BackgroundServer) -> None:
    assert exchange(server, b"") == b""  # opened, never spoke: closed by the server
    assert exchange(server, b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nx-slow: ") == b""  # a head never ends


def test_a_request_answered_longer_than_the_head_timeout_is_not_cut(server: BackgroundServer) -> None:
    body = json.dumps({"model": MODEL, "prompt": "one two", "max_tokens": 200}).encode()  # ~2 s at time_scale 1
    out = exchange(server, request(f"authorization: Bearer {KEY}", body=body))
    assert out.startswith(b"HTTP/1.1 200 OK"), out[:200]
    assert json.loads(out.partition(b"\r\n\r\n")[2])["usage"]["completion_tokens"] == 200


header_names = st.sampled_from([b"authorization", b"x-tenant", b"x-slo-ms", b"x-flowserve-program", b"accept",
                                b"x-other", b"cookie", b"content-type"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(header_names, st.binary(max_size=8)), max_size=12))
def test_the_first_header_read_once_that_repeats_is_named(headers: list[tuple[bytes, bytes]]) -> None:
    named = repeated({"headers": headers})
    seen: set[bytes] = set()
    expected = None
    for name, _ in headers:
        if name in SINGLE and name in seen:
            expected = name
            break
        seen.add(name)
    assert named == expected
