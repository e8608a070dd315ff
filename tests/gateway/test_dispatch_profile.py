"""A scoring profile as the gateway's dispatch: a file relative to the serving YAML, or
inline; served on 127.0.0.1 with simulated engines, and refused at load when malformed."""

from __future__ import annotations

import httpx
import pytest
from live_support import MODEL

from flowserve.errors import ConfigError
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config, serve_config

INSTANCES = [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}]


def test_a_profile_file_relative_to_the_serving_yaml(tmp_path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mine.yaml").write_text("scorers: [{name: prefix_hit, weight: 2}, queue_depth]\n")
    serve = tmp_path / "serve.yaml"
    serve.write_text(f"instances: [{{name: sim, gpu: A100-80G, model: {MODEL}, count: 2}}]\n"
                     "gateway: {dispatch: profiles/mine.yaml}\n")
    cfg = load_serve_config(serve)
    assert cfg.gateway.dispatch == str(tmp_path / "profiles" / "mine.yaml")


def test_an_inline_profile_serves_requests() -> None:
    cfg = serve_config({"instances": INSTANCES, "gateway": {
        "time_scale": 200.0, "dispatch": {"name": "mine", "scorers": [{"name": "prefix_hit", "weight": 2},
                                                                       {"name": "queue_depth", "weight": 1}]}}},
        "test")
    with BackgroundServer(create_app(cfg)) as srv:
        r = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "a b c d " * 50, "max_tokens": 3},
                       timeout=30)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
        assert srv.app.state.gateway.driver.dispatch.name == "mine"


def test_a_malformed_profile_is_refused_with_the_field_named() -> None:
    with pytest.raises(ConfigError, match=r"scorers\[0\] \(scorer 'prefix_hit'\) has no parameter 'blok'"):
        serve_config({"instances": INSTANCES, "gateway": {"dispatch": {"scorers": [{"name": "prefix_hit",
                                                                                      "blok": 1}]}}}, "test")
