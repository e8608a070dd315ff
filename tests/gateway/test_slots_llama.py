"""The estimate topped up from llama-server's `/slots` (`flowserve.host.slots_feed`),
against real llama-servers: a prompt another client left in a slot becomes routable."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import yaml
from live_support import poll_until, tiny_profile

from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

KEY = "sk-slots"
PROMPT = "select the total amount of loans per district and year from the account table " * 12


def serve_file(tmp: Path, servers: list[LlamaServer], profile: Path, **gateway: object) -> Path:
    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": f"llama{i}", "profile": str(profile), "backend": "openai", "url": s.base_url}
                      for i, s in enumerate(servers)],
        "api_keys": [KEY], "gateway": gateway}))
    return path


@pytest.fixture(scope="module")
def telling(llama_server_binary: Path, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[list[LlamaServer]]:
    """Two engines whose /slots name their slots' prompts (LLAMA_SERVER_SLOTS_DEBUG=1)."""
    logs = tmp_path_factory.mktemp("llama-slots")
    with contextlib.ExitStack() as stack:  # every one started is stopped, also when a later one fails
        yield [stack.enter_context(LlamaServer(
            tiny_model.gguf, ctx_size=4096, parallel=2, threads=1, alias=tiny_model.name, binary=llama_server_binary,
            log_path=logs / f"{i}.log", slots_prompts=True)) for i in range(2)]


def test_a_prompt_another_client_left_in_a_slot_is_routed_there(telling: list[LlamaServer], tiny_model: TinyModel,
                                                                 tmp_path: Path) -> None:
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 2)
    cfg = load_serve_config(serve_file(tmp_path, telling, profile, dispatch="prefix_affinity", slots_poll_s=0.05))
    with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url, timeout=30,
                                                                headers={"authorization": f"Bearer {KEY}"}) as h:
        # a client the gateway does not see warms llama1 (the gateway would pick llama0 for a new prefix)
        direct = httpx.post(f"{telling[1].base_url}/completion", timeout=60,
                            json={"prompt": PROMPT, "n_predict": 2, "cache_prompt": True})
        assert direct.status_code == 200
        rows = poll_until(lambda: {r["name"]: r for r in h.get("/status.json").json()["instances"]
                                   if r.get("prefix_view_slots")}, 30, "llama1's /slots read")
        assert list(rows) == ["llama1"] and rows["llama1"]["prefix_view"] == "estimated"
        assert h.get("/health").json()["prefix_views"]["topped_up_from_slots"] == ["llama1"]
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        asked = c.completions.create(model=tiny_model.name, prompt=PROMPT + " order by year", max_tokens=2)
        # routed to the slot that holds the prompt: the engine reports the prefix as cached
        assert asked.usage.prompt_tokens_details.cached_tokens >= asked.usage.prompt_tokens // 2
        reader = srv.app.state.gateway.driver.kv.slots["llama1"]
        assert reader.prompts >= 1 and reader.state == "topping up the estimate"
        assert "flowserve_kv_slot_prompts_total{instance=\"llama1\"}" in h.get("/metrics").text


def test_slots_that_name_no_prompt_are_not_asked_again(llama_server: LlamaServer, tiny_model: TinyModel,
                                                       tmp_path: Path) -> None:
    """Without LLAMA_SERVER_SLOTS_DEBUG, /slots tells sizes, not prompts: the reader stops."""
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 2)
    cfg = load_serve_config(serve_file(tmp_path, [llama_server], profile, dispatch="prefix_affinity",
                                       slots_poll_s=0.05))
    with BackgroundServer(create_app(cfg)) as srv:
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        c.completions.create(model=tiny_model.name, prompt=PROMPT, max_tokens=2)
        reader = srv.app.state.gateway.driver.kv.slots["llama0"]
        poll_until(lambda: reader.state.endswith("not asked again"), 30, "the reader gave up")
        assert "LLAMA_SERVER_SLOTS_DEBUG" in reader.state and reader.prompts == 0
