"""Chats on a real llama-server (its jinja templates, the tiny model): the model's chat
template rendered locally gives the engine's own token ids; tools reach the engine's
rendering; a JSON schema constrains the answer by llama-server's grammar, for chats and
for workflow steps alike."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest
from live_support import tiny_profile

from flowserve.engines.client import EngineClient
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.graph.workflow import Graph, Workflow
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings, load_serve_config
from flowserve.profiles.fitted import load_profile
from flowserve.tokenize.template import ChatTemplate
from flowserve.tokenize.text import LocalTokenizer
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef

KEY = "sk-chat-llama"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CHATS = [
    [{"role": "user", "content": "count the clients"}],
    [{"role": "system", "content": "be brief, ü"}, {"role": "user", "content": "list loans per district"},
     {"role": "assistant", "content": "select count"}, {"role": "user", "content": "and the total amount?"}],
    [{"role": "user", "content": "weather in Paris?"}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
]
COLOR = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
                                          "count": {"type": "integer", "minimum": 0, "maximum": 9}},
         "required": ["color", "count"], "additionalProperties": False}


def serve_yaml(tmp: Path, server: LlamaServer, model: TinyModel, **gateway: Any) -> Path:
    import yaml

    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": "llama", "profile": str(tiny_profile(tmp / "p.yaml", model, 2)),
                       "backend": "openai", "url": server.base_url}],
        "api_keys": [KEY], "gateway": gateway}))
    return path


@pytest.mark.parametrize("tools", [None, TOOLS])
@pytest.mark.real_engine
def test_the_local_template_gives_the_engines_token_ids(llama_server: LlamaServer, tiny_model: TinyModel,
                                                        tools: list | None) -> None:
    assert tiny_model.tokenizer_config is not None
    template = ChatTemplate.from_file(tiny_model.tokenizer_config)
    local = LocalTokenizer(tiny_model.tokenizer_json)

    async def engine_ids(chat: list[dict]) -> list[int]:
        async with EngineClient(llama_server.base_url, engine="llamacpp") as c:
            return await c.tokenize(await c.apply_chat_template(chat, tools or ()))

    for chat in CHATS:
        ids = local.encode_sync(template.render(chat, tools))
        assert ids == asyncio.run(engine_ids(chat)) and len(ids) > 5


@pytest.mark.real_engine
def test_tools_reach_the_engines_rendering_and_the_router_counts_them(llama_server: LlamaServer,
                                                                    tiny_model: TinyModel, tmp_path: Path) -> None:
    async def rendered() -> tuple[str, int, int]:
        async with EngineClient(llama_server.base_url, engine="llamacpp") as c:
            text = await c.apply_chat_template(CHATS[0], TOOLS)
            return text, len(await c.tokenize(text)), len(await c.tokenize(await c.apply_chat_template(CHATS[0])))

    text, with_tools, without = asyncio.run(rendered())
    assert '"name": "get_weather"' in text and '"required": ["city"]' in text  # the schema is in the prompt
    for gateway in ({}, {"chat_templates": {tiny_model.name: str(tiny_model.tokenizer_config)}}):
        cfg = load_serve_config(serve_yaml(tmp_path, llama_server, tiny_model, **gateway))
        with BackgroundServer(create_app(cfg)) as srv:
            c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
            resp = c.chat.completions.create(model=tiny_model.name, messages=CHATS[0], tools=TOOLS, max_tokens=3)
            plain = c.chat.completions.create(model=tiny_model.name, messages=CHATS[0], max_tokens=3)
        # the engine ran the tools' rendering (its own count) and the router routed by the same
        assert resp.usage.prompt_tokens == with_tools > without == plain.usage.prompt_tokens


@pytest.mark.real_engine
def test_a_json_schema_constrains_the_answer(llama_server: LlamaServer, tiny_model: TinyModel,
                                             tmp_path: Path) -> None:
    cfg = load_serve_config(serve_yaml(tmp_path, llama_server, tiny_model))
    fmt = {"type": "json_schema", "json_schema": {"name": "pick", "schema": COLOR, "strict": True}}
    with BackgroundServer(create_app(cfg)) as srv:
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        for chat in CHATS[:2]:
            for seed in (1, 2):
                resp = c.chat.completions.create(model=tiny_model.name, messages=chat, response_format=fmt,
                                                 max_tokens=120, seed=seed, temperature=1.0)
                assert resp.choices[0].finish_reason == "stop"
                jsonschema.validate(json.loads(resp.choices[0].message.content), COLOR)


class Pick(Workflow):
    """One chat step and one prompt step, both held to a JSON schema."""

    name = "pick"

    def start(self, g: Graph) -> None:
        fmt = {"type": "json_schema", "json_schema": {"name": "pick", "schema": COLOR}}
        sample = {"temperature": 1.0, "seed": 1}  # greedy, the random model pads with whitespace
        g.llm("chat", messages=[{"role": "user", "content": "pick a color"}], max_tokens=120, response_format=fmt,
              params=sample)
        g.llm("prompt", "pick a color:", max_tokens=120, response_format=fmt, params=sample)

    def output(self, results: dict) -> dict:
        return {k: r.text for k, r in results.items()}


@pytest.mark.real_engine
def test_workflow_steps_carry_a_response_format_to_llama_server(llama_server: LlamaServer,
                                                               tiny_model: TinyModel, tmp_path: Path) -> None:
    profile = load_profile(tiny_profile(tmp_path / "p.yaml", tiny_model, 2))

    async def run() -> dict:
        spec = InstanceSpec("llama", "A100-80G", tiny_model.name, backend="openai", url=llama_server.base_url,
                            profile=profile)
        driver = compose_driver([spec], GatewaySettings(engine_kinds={"llama": "llamacpp"}), workflows={"pick": Pick})
        await driver.start()
        try:
            return (await driver.run("pick", WorkflowRef("pick"), model=tiny_model.name)).output
        finally:
            await driver.shutdown()

    out = asyncio.run(asyncio.wait_for(run(), 120))
    for step in ("chat", "prompt"):
        jsonschema.validate(json.loads(out[step]), COLOR)
