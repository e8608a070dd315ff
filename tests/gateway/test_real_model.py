"""What a real instruct model says through flowserve is what it says directly.

SmolLM2-135M-Instruct on llama-server (`smollm2_server`), greedy (temperature 0): a chat
through the gateway — rendered by the engine's template or by the same template locally,
sent as token ids — gets llama-server's own prompt token count and its own answer, plain
and streamed; a program of several calls answers each with the model's words; a user's
workflow class (`user_apps.Quiz`: a question, then a follow-up carrying its answer) runs on
the model, each step the answer llama-server gives that step's chat. Answers are short
(few tokens): the model is real but small, and these tests time nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import httpx
import openai
import pytest
import yaml

from flowserve.client import program
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

pytestmark = pytest.mark.real_engine

KEY = "sk-real-model"
MODEL = "smollm2"
ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "examples" / "profiles" / "smollm2.yaml"
CHATS = [
    [{"role": "user", "content": "Name three primary colors."}],
    [{"role": "system", "content": "You answer in one short sentence."},
     {"role": "user", "content": "What do bees make?"}],
    [{"role": "user", "content": "Is this review positive or negative? 'A wonderful, moving film.'"},
     {"role": "assistant", "content": "Positive."}, {"role": "user", "content": "Why?"}],
]
TOKENS = 12


def direct_chat(server: LlamaServer, messages: list[dict], stream: bool = False) -> tuple[str, int]:
    """(answer, prompt tokens) from llama-server's own /v1/chat/completions."""
    body = {"messages": messages, "max_tokens": TOKENS, "temperature": 0}
    with httpx.Client(base_url=server.base_url, timeout=300) as http:
        if not stream:
            r = http.post("/v1/chat/completions", json=body).json()
            return r["choices"][0]["message"]["content"], r["usage"]["prompt_tokens"]
        text, usage = [], 0
        with http.stream("POST", "/v1/chat/completions",
                         json={**body, "stream": True, "stream_options": {"include_usage": True}}) as r:
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                text += [c["delta"].get("content") or "" for c in chunk.get("choices", [])]
                usage = (chunk.get("usage") or {}).get("prompt_tokens", usage)
        return "".join(text), usage


def chat_template_file(gguf_path: Path, out: Path) -> Path:
    """The model's chat template, read from its GGUF, as a `chat_template.jinja`."""
    field = gguf.GGUFReader(str(gguf_path)).fields["tokenizer.chat_template"]
    out.write_text(bytes(field.parts[field.data[0]]).decode())
    return out


def gateway_config(tmp: Path, server: LlamaServer, **gateway: Any) -> Path:
    path = tmp / f"serve-{len(list(tmp.glob('serve-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": "llama", "profile": str(PROFILE), "backend": "openai", "url": server.base_url}],
        "api_keys": [KEY], "gateway": {"engine_kinds": {"llama": "llamacpp"}, **gateway}}))
    return path


@pytest.fixture(scope="module")
def gateway(smollm2_server: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("real-model")
    workflows = {"quiz": {"app": "user_apps:Quiz", "words": TOKENS}}
    with BackgroundServer(create_app(load_serve_config(gateway_config(tmp, smollm2_server, workflows=workflows)))) \
            as srv:
        yield srv.url


def test_a_chat_through_the_gateway_is_the_models_own_answer(smollm2_server: LlamaServer, smollm2: Path,
                                                             gateway: str, tmp_path: Path) -> None:
    local = gateway_config(tmp_path, smollm2_server,
                           chat_templates={MODEL: str(chat_template_file(smollm2, tmp_path / "chat_template.jinja"))})
    with BackgroundServer(create_app(load_serve_config(local))) as rendered_here:
        for url in (gateway, rendered_here.url):  # the engine's rendering, then the template rendered locally
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
            for chat in CHATS:
                answer, prompt_tokens = direct_chat(smollm2_server, chat)
                r = client.chat.completions.create(model=MODEL, messages=chat, max_tokens=TOKENS, temperature=0)
                assert (r.choices[0].message.content, r.usage.prompt_tokens) == (answer, prompt_tokens), url
                assert len(answer.split()) >= 2 and r.usage.completion_tokens <= TOKENS


def test_a_streamed_chat_is_the_models_own_answer(smollm2_server: LlamaServer, gateway: str) -> None:
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=KEY, max_retries=0)
    for chat in CHATS[:2]:
        answer, prompt_tokens = direct_chat(smollm2_server, chat, stream=True)
        assert answer == direct_chat(smollm2_server, chat)[0]
        chunks = list(client.chat.completions.create(model=MODEL, messages=chat, max_tokens=TOKENS, temperature=0,
                                                     stream=True, stream_options={"include_usage": True}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == answer and chunks[-1].usage.prompt_tokens == prompt_tokens
        assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 2  # streamed, not one block


def test_a_program_of_several_calls_answers_with_the_models_words(smollm2_server: LlamaServer,
                                                                  gateway: str) -> None:
    run = program(gateway, api_key=KEY, slo_ms=600_000)
    answers = []
    with run as client:
        history: list[dict] = []
        for question in ("Name three primary colors.", "Which of them is the color of the sky?", "And of grass?"):
            history.append({"role": "user", "content": question})
            r = client.chat.completions.create(model=MODEL, messages=history, max_tokens=TOKENS, temperature=0)
            answers.append(r.choices[0].message.content)
            history.append({"role": "assistant", "content": answers[-1]})
    # the same conversation, each turn sent to llama-server directly, gets the same words
    replay: list[dict] = []
    for i, turn in enumerate(history[::2]):
        replay.append(turn)
        assert direct_chat(smollm2_server, replay)[0] == answers[i]
        replay.append({"role": "assistant", "content": answers[i]})
    assert run.summary["calls"] == 3 and run.summary["failed_calls"] == 0
    assert "red" in answers[0].lower(), answers  # a real model, not random tokens


def test_a_users_workflow_class_answers_with_the_models_words(smollm2_server: LlamaServer, gateway: str) -> None:
    question, follow_up = "Name three primary colors.", "Which of them is the color of the sky?"
    with httpx.Client(timeout=600) as http:
        r = http.post(f"{gateway}/v1/workflows/quiz", headers={"authorization": f"Bearer {KEY}"},
                      json={"input": {"question": question, "follow_up": follow_up}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "completed" and [c["node"] for c in body["calls"]] == ["first", "second"]
    out = body["output"]
    assert out["first"] == direct_chat(smollm2_server, [{"role": "user", "content": question}])[0]
    assert out["second"] == direct_chat(smollm2_server, [
        {"role": "user", "content": question}, {"role": "assistant", "content": out["first"]},
        {"role": "user", "content": follow_up}])[0]
    assert "red" in out["first"].lower(), out
