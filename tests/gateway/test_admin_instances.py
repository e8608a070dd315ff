"""One bad instance never takes a model down (issue 27, item 6): engine URLs are http or
https with a host and a port (admin route and YAML alike), and an instance whose engine
does not answer is kept out of routing and tokenization until it does. The admin routes
are fuzzed: a 201 or a 4xx JSON error, never a 5xx, and completions keep working."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_support import MODEL

from flowserve.errors import ConfigError
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

KEY = "sk-admin"
AUTH = {"authorization": f"Bearer {KEY}"}
SIMS = {"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}
DEAD = {"name": "dead", "gpu": "A100-80G", "model": MODEL, "backend": "openai", "url": "http://127.0.0.1:9"}


def config(*extra: dict) -> object:
    return serve_config({"instances": [SIMS, *extra], "api_keys": [KEY], "gateway": {"time_scale": 1e4}}, "test")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(config())) as srv:
        yield srv


def completions_work(http: httpx.Client, n: int = 4) -> None:
    for i in range(n):
        resp = http.post("/v1/completions", json={"model": MODEL, "prompt": f"count the loans {i}", "max_tokens": 4})
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-flowserve-instance"].startswith("sim-")


@pytest.mark.parametrize(("url", "why"), [
    ("file:///etc/passwd", "not file://"), ("ftp://127.0.0.1:21", "not ftp://"),
    ("http://127.0.0.1", "write the port out"), ("http://127.0.0.1:99999", "out of range"),
    ("http://:8000", "no valid host"), ("http://u:secret@127.0.0.1:80", "credentials"),
    ("http://127.0.0.1:80/v1?x=1", "no query"), ("127.0.0.1:8000", "without a scheme"),
])
def test_the_admin_route_refuses_urls_that_are_not_engine_urls(server: BackgroundServer, url: str, why: str) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        resp = http.post("/admin/instances", json={**DEAD, "url": url})
        assert resp.status_code == 400, resp.text
        assert why in resp.json()["error"]["message"]
        assert "dead" not in [i["name"] for i in http.get("/admin/instances").json()["instances"]]


def test_a_dead_instance_added_next_to_healthy_ones_never_serves_or_tokenizes(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        resp = http.post("/admin/instances", json=DEAD)
        assert resp.status_code == 201 and resp.json()["up"] is False
        [dead] = [i for i in http.get("/admin/instances").json()["instances"] if i["name"] == "dead"]
        assert not dead["up"] and dead["circuit"] in ("open", "half_open")
        completions_work(http)  # 503 "cannot tokenize the prompt" before
        chat = http.post("/v1/chat/completions", json={"model": MODEL, "max_tokens": 4,
                                                        "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200, chat.text
        assert http.delete("/admin/instances/dead").status_code == 200


def test_a_dead_instance_in_the_yaml_is_down_from_the_start() -> None:
    with BackgroundServer(create_app(config(DEAD))) as srv, \
            httpx.Client(base_url=srv.url, headers=AUTH, timeout=30) as http:
        [dead] = [i for i in http.get("/admin/instances").json()["instances"] if i["name"] == "dead"]
        assert not dead["up"]
        completions_work(http)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://127.0.0.1", "unix:///tmp/engine.sock"])
def test_the_yaml_refuses_urls_that_are_not_engine_urls(url: str) -> None:
    with pytest.raises(ConfigError, match=r"instances\.1\.url|url"):
        config({**DEAD, "url": url})


def test_a_url_on_a_simulated_instance_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match="url is for backend openai"):
        config({**DEAD, "backend": "sim"})


@pytest.mark.parametrize("name", ["a/b", "..", "x\r\ny", "x" * 5000, "two words", "é", "-lead", ""])
def test_instance_names_that_cannot_be_a_path_segment_or_header_are_refused(server: BackgroundServer,
                                                                           name: str) -> None:
    """Issue 35 item 10: a name with CR/LF broke every request routed to it."""
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        resp = http.post("/admin/instances", json={**SIMS, "count": 1, "name": name})
        assert resp.status_code == 400, resp.text
        assert "name" in resp.json()["error"]["message"]
        assert len(resp.json()["error"]["message"]) < 400  # the 5,000 characters are not echoed back
        assert len(http.get("/admin/instances").json()["instances"]) == 2
        completions_work(http, 2)
    with pytest.raises(ConfigError, match="instance name"):
        config({**SIMS, "name": name or "a/b"})


names = st.text(alphabet="abcxyz-_.0123456789é/ \r\n", max_size=12).map(lambda s: f"f-{s}")
urls = st.one_of(st.integers(1, 65535).filter(lambda p: p > 1024).map("http://127.0.0.1:{}".format),
                 st.sampled_from(["file:///etc/passwd", "http://127.0.0.1", "http://[::1]:1", "gopher://x:70",
                                  "http://h:0", "javascript:alert(1)", "//127.0.0.1:9", "http://127.0.0.1:9"]),
                 st.text(max_size=30))
leaf = (st.none() | st.booleans() | st.integers(-3, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=10))
instances = st.fixed_dictionaries({"name": names | leaf}, optional={
    "gpu": st.sampled_from(["A100-80G", "L4", "nope"]) | leaf, "model": st.sampled_from([MODEL, "nope"]) | leaf,
    "backend": st.sampled_from(["sim", "openai", "vllm"]) | leaf, "url": urls | leaf,
    "count": st.integers(-1, 3) | leaf, "kind": st.sampled_from(["llm", "search", "x"]) | leaf,
    "tp": st.integers(-1, 4) | leaf, "extra": leaf})


@pytest.fixture(scope="module")
def admin(server: BackgroundServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        yield http


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(body=instances | leaf | st.lists(leaf, max_size=3), delete=names)
def test_fuzz_admin_routes_answer_201_or_a_4xx_json_error(admin: httpx.Client, body: object, delete: str) -> None:
    resp = admin.post("/admin/instances", json=body)
    assert resp.status_code in (201, 400), resp.text
    if resp.status_code == 400:
        assert resp.json()["error"]["message"]
    else:
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", resp.json()["added"])
    resp = admin.delete(f"/admin/instances/{quote(delete, safe='')}")
    assert resp.status_code < 500, resp.text  # 200, 404 JSON, or the router's redirect of a trailing slash
    assert admin.get("/admin/instances").status_code == 200


def test_after_the_fuzz_completions_still_work(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http:
        completions_work(http)
        assert http.get("/health").status_code == 200
