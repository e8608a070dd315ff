"""Fuzzing the gateway's request parsing on every route (issue 9): hostile JSON shapes,
encodings, nesting and types. Property: a clean 4xx with an OpenAI-style JSON error, or a
valid result — never a 5xx, never an exception. The ASGI app is called in-process on one
event loop (simulated engines a million times faster than real), so ~1,500 cases take
seconds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.host.settings import serve_config

KEY, NARROW = "sk-fuzz", "sk-fuzz-narrow"  # KEY acts for every tenant; NARROW only for its own, "b"
CASES = settings(max_examples=500, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class App:
    def __init__(self) -> None:
        cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                            "api_keys": {KEY: {"tenant": "fuzz", "acts_for": ["*"]}, NARROW: "b"},
                            "gateway": {"time_scale": 1e6, "dispatch": "prefix_affinity",
                                                           "default_max_tokens": 4}}, "fuzz")
        self.app = create_app(cfg)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.app.state.gateway.start())

    def call(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
        return self.loop.run_until_complete(asyncio.wait_for(self._call(method, path, body, headers), 30))

    async def _call(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
        sent = False
        out: dict[str, Any] = {"status": None, "headers": {}, "body": []}

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # no disconnect while the app answers
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                out["status"] = msg["status"]
                out["headers"] = {k.decode(): v.decode() for k, v in msg.get("headers", [])}
            else:
                out["body"].append(msg.get("body", b""))

        hdrs = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "headers": hdrs, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        await self.app(scope, receive, send)
        return out["status"], out["headers"], b"".join(out["body"])

    def close(self) -> None:
        self.loop.run_until_complete(self.app.state.gateway.stop())
        self.loop.close()


@pytest.fixture(scope="module")
def app() -> Iterator[App]:
    a = App()
    yield a
    a.close()


def check(status: int, headers: dict, body: bytes) -> None:
    """The property: a 2xx with a valid body, or a 4xx with an OpenAI-style error."""
    assert status is not None and status < 500, (status, body[:300])
    if headers.get("content-type", "").startswith("text/event-stream"):
        events = [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        for e in events[:-1]:
            assert "error" not in json.loads(e), e  # sim engines never fail: no in-band errors either
        return
    data = orjson.loads(body)
    if status >= 400:
        assert set(data["error"]) == {"message", "type", "param", "code"} and data["error"]["message"]
    else:
        assert isinstance(data, dict)


texts = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=30)
json_leaf = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | texts
json_values = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(texts, inner, max_size=4), max_leaves=12)
parts = st.lists(st.dictionaries(st.sampled_from(["type", "text", "image_url"]), json_values, max_size=3)
                 | json_values, max_size=3)
roles = st.sampled_from(["user", "system", "assistant", ""]) | json_values
names = st.sampled_from(["get_weather", "f", "", "bad name!", "x" * 65]) | json_values
schemas = (st.just({"type": "object", "properties": {"city": {"type": "string"}}}) | st.just({"type": "objekt"})
           | st.just({"type": 3}) | st.just({"enum": []}) | json_values)
function = st.fixed_dictionaries({}, optional={"name": names, "description": json_values, "parameters": schemas,
                                               "strict": st.booleans() | json_values})
tools = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["function", "custom"]) | json_values,
                                        "function": function | json_values}), max_size=2) | json_values
tool_calls = st.lists(st.fixed_dictionaries({"id": texts | json_values, "type": st.just("function") | json_values,
                                             "function": st.fixed_dictionaries({"name": names, "arguments": texts})
                                             | json_values}), max_size=2) | json_values
message = st.fixed_dictionaries({}, optional={"role": roles | st.sampled_from(["tool", "developer", "function"]),
                                              "content": texts | parts | json_values, "name": json_values,
                                              "tool_calls": tool_calls, "tool_call_id": texts | json_values})
response_formats = (st.sampled_from([{"type": "text"}, {"type": "json_object"}, {"type": "xml"}])
                    | st.fixed_dictionaries({"type": st.just("json_schema"), "json_schema": st.fixed_dictionaries(
                        {"name": names}, optional={"schema": schemas, "strict": json_values})}) | json_values)
chat_only = {"tools": tools, "response_format": response_formats, "parallel_tool_calls": st.booleans() | json_values,
             "tool_choice": st.sampled_from(["auto", "none", "required", "sometimes"])
             | st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": names})})
             | json_values,
             "logprobs": st.booleans() | json_values, "top_logprobs": st.integers(-1, 25) | json_values}
models = st.sampled_from([MODEL] * 6 + ["nope", ""]) | json_values
common = {"max_tokens": st.integers(-3, 10) | st.integers(10**5, 10**12) | json_values,
          "stream": st.booleans() | json_values, "n": st.integers(0, 3) | json_values,
          "stream_options": st.just({"include_usage": True}) | json_values,
          "temperature": st.floats(0, 2) | json_values, "stop": json_values, "logit_bias": json_values}
prompts = (texts | st.lists(st.integers(-5, 2**40), max_size=8) | st.lists(texts, max_size=2)
           | st.lists(st.lists(st.integers(0, 100), max_size=4), max_size=2) | json_values)
completion = st.fixed_dictionaries({"model": models, "prompt": prompts}, optional=common)
chat = st.fixed_dictionaries({"model": models, "messages": st.lists(message, min_size=1, max_size=3) | json_values},
                             optional={**common, **chat_only,
                                       "max_completion_tokens": st.integers(-1, 8) | json_values})


def encode(value: Any, how: int) -> bytes:
    raw = json.dumps(value, ensure_ascii=bool(how & 1))  # ensure_ascii: surrogates as \\udXXX escapes
    if how & 2:  # a non-UTF-8 encoding of the same JSON
        return raw.encode("utf-16", errors="surrogatepass")
    return raw.encode("utf-8", errors="surrogatepass")


bodies = st.one_of(st.binary(max_size=64), st.tuples(json_values, st.integers(0, 3)).map(lambda v: encode(*v)),
                   st.integers(1, 3000).map(lambda d: b"[" * d + b"]" * d))
headers = st.fixed_dictionaries({"authorization": st.sampled_from([f"Bearer {KEY}", f"Bearer {NARROW}"])}, optional={
    "x-tenant": st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=200)
    | st.sampled_from(["a", "b", "other", "fuzz"]),
    "x-priority": st.sampled_from(["1", "-5", "high", "9" * 400, ""]),
    "x-slo-ms": st.sampled_from(["100", "0", "-1", "nan", "inf", "1e400", "soon"])})


@CASES
@given(route=st.sampled_from(["/v1/completions", "/v1/chat/completions"]), shaped=st.booleans(),
       completion_body=completion, chat_body=chat, how=st.integers(0, 3), raw=bodies, hdrs=headers)
def test_llm_routes_answer_4xx_or_a_result(app: App, route: str, shaped: bool, completion_body: Any,
                                           chat_body: Any, how: int, raw: bytes, hdrs: dict) -> None:
    body = encode(completion_body if route == "/v1/completions" else chat_body, how) if shaped else raw
    check(*app.call("POST", route, body, hdrs))


@CASES
@given(route=st.sampled_from(["/v1/workflows/text2sql", "/v1/workflows/nope", "/v1/queries/{x}", "/v1/models",
                              "/health", "/admin/instances", "/v1/completions"]),
       method=st.sampled_from(["GET", "POST", "DELETE"]), raw=bodies, x=texts,
       workflow=st.fixed_dictionaries({}, optional={"input": json_values | st.fixed_dictionaries(
           {"question": texts}), "model": json_values, "async": st.booleans()}), shaped=st.booleans(),
       hdrs=headers)
def test_other_routes_answer_4xx_or_a_result(app: App, route: str, method: str, raw: bytes, x: str, workflow: Any,
                                             shaped: bool, hdrs: dict) -> None:
    path = route.replace("{x}", "".join(c for c in x if c.isprintable() and c.isascii() and c not in "/?#"))
    body = encode(workflow, 0) if shaped else raw
    if route == "/admin/instances":
        hdrs = {k: v for k, v in hdrs.items() if k != "authorization"}  # refused before the body is used
    status, h, out = app.call(method, path, body, hdrs)
    if route == "/health" and method == "GET":
        assert status == 200
        return
    check(status, h, out)


# --------------------------------------------------------------------------- programs

program_names = (st.sampled_from(["p", "agent-1", "q", "", " ", "x" * 128, "x" * 129, "naïve", "a b", "a\tb", "../x"])
                 | st.text(st.characters(min_codepoint=0, max_codepoint=255), max_size=140))
program_headers = st.fixed_dictionaries({"x-tenant": st.sampled_from(["a", "b"]),
                                         "key": st.sampled_from([KEY, NARROW])}, optional={
    "x-flowserve-program": program_names, "x-flowserve-stage": program_names, "x-flowserve-thread": program_names,
    "x-slo-ms": st.sampled_from(["1000", "0", "-1", "inf", "nan", "1e400", "abc", "2500.5"]),
    "x-priority": st.sampled_from(["0", "3", "x"])})
program_steps = st.lists(st.tuples(st.sampled_from(["call", "call", "get", "delete"]), program_headers),
                         min_size=1, max_size=6)
OPENED: set[tuple[str, str]] = set()  # (tenant, program id) with a call answered (one gateway for all examples)


@CASES
@given(program_steps)
def test_program_headers_and_routes_answer_cleanly_and_keep_tenants_apart(app: App, steps) -> None:
    body = orjson.dumps({"model": MODEL, "prompt": "an agent step", "max_tokens": 2})
    for action, hdrs in steps:
        hdrs = {k: v.encode("latin-1", errors="replace").decode("latin-1") for k, v in hdrs.items()}
        key = hdrs.pop("key")
        tenant, pid = hdrs["x-tenant"], hdrs.get("x-flowserve-program", "p")
        auth = {"authorization": f"Bearer {key}"}
        if key == NARROW and tenant != "b":  # a key acts only for the tenants it is granted
            status, h, out = app.call("POST", "/v1/completions", body, {**auth, **hdrs})
            assert status in (400, 403) and (status == 400 or json.loads(out)["error"]["param"] == "x-tenant")
            continue
        if action == "call":
            status, h, out = app.call("POST", "/v1/completions", body, {**auth, **hdrs})
            check(status, h, out)
            if status == 200 and "x-flowserve-program" in hdrs:
                OPENED.add((tenant, pid))
            continue
        path = "/v1/programs/" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in pid)
        status, h, out = app.call("GET" if action == "get" else "DELETE", path, b"", {**auth, "x-tenant": tenant})
        check(status, h, out)
        if path.endswith("/" + pid) and (tenant, pid) not in OPENED:
            assert status == 404  # another tenant's program is never shown
