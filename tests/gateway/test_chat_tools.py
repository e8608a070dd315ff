"""Chats with tools through the gateway to an engine that calls tools (`tool_engine`,
on 127.0.0.1), with the official `openai` client: the engine sees every field, the
client gets its tool calls back (whole and streamed), and the router routes by the
engine's own rendering of the chat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from tool_engine import ARGUMENTS, OWN, PLAIN, ToolEngine

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

KEY = "sk-tools"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": "Weather in Paris?"}]


def config(engine: ToolEngine) -> dict[str, Any]:
    return {"instances": [{"name": "e", "gpu": "A100-80G", "model": engine.model, "backend": "openai",
                           "url": engine.url}],
            "api_keys": [KEY], "gateway": {"engine_kinds": {"e": "vllm"}, "retry_backoff_s": 0.01}}


@pytest.fixture(scope="module")
def engine() -> Iterator[ToolEngine]:
    with ToolEngine() as e:
        yield e


@pytest.fixture(scope="module")
def client(engine: ToolEngine) -> Iterator[openai.OpenAI]:
    with BackgroundServer(create_app(serve_config(config(engine), "test"))) as srv:
        yield openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)


def test_tool_calls_come_back_and_the_engine_sees_every_field(engine: ToolEngine, client: openai.OpenAI) -> None:
    engine.requests.clear()
    resp = client.chat.completions.create(model=engine.model, messages=ASK, tools=TOOLS, tool_choice="auto",
                                          parallel_tool_calls=False, seed=7, user="u1", max_tokens=20,
                                          stop=["\n\n"])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "get_weather", ARGUMENTS)
    # routed by the engine's own rendering of messages and tools, then sent as a chat, fields intact
    [tok] = engine.bodies("/tokenize")
    assert tok["messages"] == [{**m} for m in ASK] and tok["tools"] == TOOLS and tok["add_generation_prompt"]
    [sent] = engine.bodies("/v1/chat/completions")
    assert sent["tools"] == TOOLS and sent["messages"] == ASK
    assert {k: sent[k] for k in ("tool_choice", "parallel_tool_calls", "seed", "user", "stop", "max_tokens")} \
        == {"tool_choice": "auto", "parallel_tool_calls": False, "seed": 7, "user": "u1", "stop": ["\n\n"],
            "max_tokens": 20}
    assert resp.usage.prompt_tokens == len(engine.render(ASK, TOOLS))


def test_a_tool_result_round_reaches_the_engine_and_reports_the_cached_prefix(engine: ToolEngine,
                                                                            client: openai.OpenAI) -> None:
    first = client.chat.completions.create(model=engine.model, messages=ASK, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    history = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    engine.requests.clear()
    second = client.chat.completions.create(model=engine.model, messages=history, tools=TOOLS,
                                            logprobs=True, top_logprobs=1)
    assert second.choices[0].message.content == "it is sunny" and second.choices[0].finish_reason == "stop"
    assert second.choices[0].logprobs.content[0].token == "it"
    [sent] = engine.bodies("/v1/chat/completions")
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == ARGUMENTS
    assert sent["messages"][3] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert sent["logprobs"] is True and sent["top_logprobs"] == 1
    # the second round extends the first one's prompt: the engine's cache hit is relayed
    assert second.usage.prompt_tokens_details.cached_tokens >= len(engine.render(ASK, TOOLS)) - 1


def test_streamed_tool_call_deltas_are_relayed_unchanged(engine: ToolEngine, client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model=engine.model, messages=ASK, tools=TOOLS, stream=True,
                                                 stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(deltas) == 3 and deltas[0].role is None  # as the engine sent them, after its role-only chunk
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.tool_calls
    assert deltas[0].tool_calls[0].id == "call_1" and deltas[0].tool_calls[0].function.name == "get_weather"
    assert "".join(d.tool_calls[0].function.arguments or "" for d in deltas) == ARGUMENTS
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["tool_calls"]
    assert chunks[-1].usage.prompt_tokens == len(engine.render(ASK, TOOLS))


def test_a_plain_chat_runs_as_token_ids_of_the_engines_rendering(engine: ToolEngine,
                                                                 client: openai.OpenAI) -> None:
    engine.requests.clear()
    resp = client.chat.completions.create(model=engine.model, messages=ASK, max_tokens=5)
    assert resp.choices[0].message.content == PLAIN and resp.choices[0].message.tool_calls is None
    [sent] = engine.bodies("/v1/completions")
    assert bytes(sent["prompt"]) == engine.render(ASK, None)
    assert not engine.bodies("/v1/chat/completions")


def test_completion_logprobs_are_relayed(engine: ToolEngine, client: openai.OpenAI) -> None:
    resp = client.completions.create(model=engine.model, prompt="hello", max_tokens=3, logprobs=1)
    assert resp.choices[0].logprobs.token_logprobs == [-0.25]
    assert engine.bodies("/v1/completions")[-1]["logprobs"] == 1
    plain = client.completions.create(model=engine.model, prompt="hello", max_tokens=3)
    assert plain.choices[0].logprobs is None


def test_a_json_response_format_goes_to_the_engine_as_a_chat(engine: ToolEngine, client: openai.OpenAI) -> None:
    engine.requests.clear()
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": {
        "type": "object", "properties": {"sky": {"type": "string"}}}}}
    client.chat.completions.create(model=engine.model, messages=ASK, response_format=fmt)
    [sent] = engine.bodies("/v1/chat/completions")
    assert sent["response_format"] == fmt and "tools" not in sent


def test_bad_tool_requests_get_a_400_naming_the_field(engine: ToolEngine, client: openai.OpenAI) -> None:
    def error(**body: Any) -> tuple[str | None, str]:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model=engine.model, **{"messages": ASK, **body})
        err = info.value.body
        return err["param"], err["message"]

    assert error(tools={"not": "a list"})[0] == "tools"
    assert error(tools=[{"type": "function", "function": {"description": "no name"}}])[0] \
        == "tools.0.function.name"
    param, msg = error(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}])
    assert param == "tools.0.function.parameters" and "JSON schema" in msg
    param, msg = error(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert param == "tool_choice" and "get_time" in msg
    assert error(messages=[*ASK, {"role": "tool", "content": "x"}])[0] == "messages.2"
    param, msg = error(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}})
    assert param == "response_format.json_schema.schema" and "JSON schema" in msg
    assert error(top_logprobs=2)[0] == "top_logprobs"
    assert error(extra_body={"modalities": ["audio"]}) == (
        "modalities", "modalities: this field is not supported by flowserve (supported fields: docs/serving.md)")
    assert not [b for p, b in engine.requests if p != "/tokenize" and b.get("messages") == ASK and "modalities" in b]


def test_the_raw_body_has_the_openai_shape(engine: ToolEngine, client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model=engine.model, messages=ASK, tools=TOOLS)
    assert json.loads(raw.content)["choices"][0]["message"]["tool_calls"][0]["type"] == "function"


def test_answers_are_the_engine_s_own(engine: ToolEngine, client: openai.OpenAI) -> None:
    """Issue 35 item 17: the engine's id and system_fingerprint were replaced or dropped, and a
    stream's role-only first chunk was merged into the first content chunk."""
    chat = client.chat.completions.create(model=engine.model, messages=ASK, tools=TOOLS)
    text = client.completions.create(model=engine.model, prompt="hello", max_tokens=3)
    plain = client.chat.completions.create(model=engine.model, messages=ASK)  # sent to /v1/completions as ids
    for resp, engine_id in ((chat, "chatcmpl-t"), (text, "cmpl-t"), (plain, "cmpl-t")):
        assert (resp.id, resp.system_fingerprint, resp.created) == (engine_id, OWN["system_fingerprint"],
                                                                    OWN["created"])
    chunks = list(client.chat.completions.create(model=engine.model, messages=ASK, tools=TOOLS, tool_choice="none",
                                                 stream=True))
    assert {(c.id, c.system_fingerprint, c.created) for c in chunks} == {("chatcmpl-t", OWN["system_fingerprint"],
                                                                          OWN["created"])}
    first, second = chunks[0].choices[0].delta, chunks[1].choices[0].delta
    assert (first.role, first.content) == ("assistant", "") and second.role is None and second.content
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "it is Weather in Paris?"
    pieces = list(client.completions.create(model=engine.model, prompt="hello", max_tokens=3, stream=True))
    assert {(c.id, c.system_fingerprint) for c in pieces} == {("cmpl-t", OWN["system_fingerprint"])}
    assert "".join(c.choices[0].text for c in pieces if c.choices) == PLAIN
