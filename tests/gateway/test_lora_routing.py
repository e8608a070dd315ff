"""Models and LoRA adapters through the gateway: a request naming an adapter reaches only
the engines that list it and names the adapter to them (vLLM runs an adapter when the
request names it as its model); `/v1/models` lists adapters and other served names; an
unknown model is a 404 listing them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from http_engine import HttpEngine

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

MODEL = "llama-3.1-8b"


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[str, HttpEngine, HttpEngine]]:
    with HttpEngine("lora") as lora, HttpEngine("plain") as plain:
        config = serve_config({"instances": [
            {"name": "lora", "gpu": "A100-80G", "model": MODEL, "backend": "openai", "url": lora.url,
             "models": ["chat"], "lora_adapters": ["sql-lora"], "max_loras": 2},
            {"name": "plain", "gpu": "A100-80G", "model": MODEL, "backend": "openai", "url": plain.url},
        ], "gateway": {"engine_kinds": {"lora": "vllm", "plain": "vllm"}, "dispatch": "round_robin"}}, "test")
        with BackgroundServer(create_app(config)) as srv:
            yield srv.url, lora, plain


def sent(engine: HttpEngine) -> list[dict]:
    return [b for b in engine.completions() if "max_tokens" in b]


def test_an_adapter_request_goes_only_where_the_adapter_is_and_names_it(setup) -> None:
    url, lora, plain = setup
    before = len(sent(plain))
    for k in range(4):
        resp = httpx.post(f"{url}/v1/completions", json={"model": "SQL-lora", "prompt": f"q{k} " * 20,
                                                        "max_tokens": 2})
        assert resp.status_code == 200, resp.text
    assert len(sent(plain)) == before  # round robin would have sent half there
    assert [b["model"] for b in sent(lora)[-4:]] == ["sql-lora"] * 4
    for k in range(4):  # the base model goes to both, as the engines' default model
        assert httpx.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": f"b{k}", "max_tokens": 2}
                          ).status_code == 200
    assert len(sent(plain)) > before and "model" not in sent(plain)[-1]


def test_models_lists_adapters_and_served_names_and_unknown_is_404(setup) -> None:
    url, _, _ = setup
    assert sorted(m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]) == ["chat", MODEL, "sql-lora"]
    resp = httpx.post(f"{url}/v1/completions", json={"model": "other-lora", "prompt": "x", "max_tokens": 2})
    assert resp.status_code == 404
    assert "served: chat, llama-3.1-8b, sql-lora" in resp.json()["error"]["message"]
