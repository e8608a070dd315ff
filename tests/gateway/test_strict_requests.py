"""Issue 27, items 9 and 10: values of the wrong type get a 400 naming the field (as the
OpenAI API answers), unknown fields are refused by name, and protocol-level garbage gets a
400 from the HTTP server before any route runs, with the server still healthy after."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

KEY = "sk-strict"
AUTH = {"authorization": f"Bearer {KEY}"}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
COMPLETION = {"model": MODEL, "prompt": "hi", "max_tokens": 2}


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}], "api_keys": [KEY],
                        "gateway": {"time_scale": 1000.0}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv


def post(server: BackgroundServer, route: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}{route}", json=body, headers={**AUTH, **headers}, timeout=30)


@pytest.mark.parametrize(("route", "body", "param"), [
    ("/v1/completions", {**COMPLETION, "max_tokens": "10"}, "max_tokens"),
    ("/v1/completions", {**COMPLETION, "stream": "yes"}, "stream"),
    ("/v1/completions", {**COMPLETION, "temperature": "hot"}, "temperature"),
    ("/v1/completions", {**COMPLETION, "prompt": [True, False]}, "prompt.0"),
    ("/v1/completions", {**COMPLETION, "n": 2}, "n"),
    ("/v1/completions", {**COMPLETION, "echo": True}, "echo"),
    ("/v1/completions", {**COMPLETION, "response_format": {"type": "json_object"}}, "response_format"),
    ("/v1/completions", {**COMPLETION, "logprobs": 9}, "logprobs"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 1.5}, "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "seed": "7"}, "seed"),
    ("/v1/chat/completions", {**CHAT, "stop": [1]}, "stop.0"),
    ("/v1/chat/completions", {**CHAT, "logprobs": 1}, "logprobs"),
    ("/v1/chat/completions", {**CHAT, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ("/v1/chat/completions", {**CHAT, "functions": []}, "functions"),
    # issue 35 item 13: accepted, then ignored
    ("/v1/chat/completions", {**CHAT, "stream_options": {"include_usage": True}}, "stream_options"),
    ("/v1/completions", {**COMPLETION, "stream": False, "stream_options": {"include_usage": True}}, "stream_options"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 2, "max_completion_tokens": 3}, "max_completion_tokens"),
    ("/v1/chat/completions", {**CHAT, "audio": {"voice": "x"}}, "audio"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "x", "audio": {}}]},
     "messages.0.audio"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "x", "tool_calls": []}]},
     "messages.0"),
])
def test_wrong_types_and_unknown_fields_get_a_400_naming_the_field(server: BackgroundServer, route: str,
                                                                   body: dict[str, Any], param: str) -> None:
    resp = post(server, route, body)
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["param"] == param and err["message"].startswith(f"{param}:") and err["type"] == "invalid_request_error"


@pytest.mark.parametrize("slo", ["inf", "1e400", "-inf", "nan", "0"])
def test_an_slo_must_be_a_positive_finite_number(server: BackgroundServer, slo: str) -> None:
    resp = post(server, "/v1/chat/completions", CHAT, **{"x-slo-ms": slo})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "x-slo-ms"


def test_supported_fields_are_accepted(server: BackgroundServer) -> None:
    chat = {k: v for k, v in CHAT.items() if k != "max_tokens"}  # max_completion_tokens below
    resp = post(server, "/v1/chat/completions", {
        **chat, "temperature": 1, "top_p": 0.5, "stop": "x", "seed": 3, "user": "u", "presence_penalty": 0,
        "frequency_penalty": 0.5, "logit_bias": {"12": -100}, "logprobs": True, "top_logprobs": 2, "n": 1,
        "response_format": {"type": "json_object"}, "stream_options": None, "max_completion_tokens": 2,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "required", "parallel_tool_calls": True, "top_k": 5, "min_p": 0.1, "ignore_eos": True},
        **{"x-slo-ms": "60000"})
    assert resp.status_code == 200, resp.text
    assert post(server, "/v1/completions", {**COMPLETION, "logprobs": 2, "prompt": [[1, 2, 3]]}).status_code == 200


def raw_request(server: BackgroundServer, data: bytes) -> bytes:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):  # the server closes the connection after its answer
            out += chunk
    return out


@pytest.mark.parametrize("head", [
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"3\r\nabc\r\n0\r\n\r\n",
])
def test_protocol_garbage_is_refused_before_routing(server: BackgroundServer, head: bytes) -> None:
    answer = raw_request(server, head)
    # uvicorn's parser answers these itself, in plain text: no route (and no JSON shape) is reached
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"Invalid HTTP request" in answer
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
