"""Chat templates rendered locally as Hugging Face renders them, and chats in the IR."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.engines.tinymodel import CHAT_TEMPLATE
from flowserve.graph.prompt import Chat, Lit, Out, Segment, Turn, as_chat, refs, resolve
from flowserve.tokenize.chat import chat_messages, chat_parts
from flowserve.tokenize.prompts import SimTokenizer
from flowserve.tokenize.template import ChatTemplate, TemplateError

# a ChatML-like template using what Hub templates use: bos_token, loop controls,
# namespace, tojson, raise_exception, strftime_now and {% generation %}
CHATML = """{{ bos_token }}
{%- if tools %}<|im_start|>system
{{ tools | tojson }}<|im_end|>
{% endif %}
{%- for m in messages %}
    {%- if m.role not in ['system', 'user', 'assistant'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}
    {%- if loop.index > 9 %}{% break %}{% endif %}
<|im_start|>{{ m.role }}
{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}
{%- if m.tool_calls is defined %} {{ m.tool_calls | tojson }}{% endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant {{ strftime_now('%Y') }}
{% endif %}"""


def test_renders_like_hugging_face_with_its_globals_and_whitespace_rules() -> None:
    t = ChatTemplate({"default": CHATML}, {"bos_token": "<s>"}, now=lambda: datetime(2031, 5, 1))
    chat = [{"role": "user", "content": "a <b> & ü"}, {"role": "assistant", "content": "x", "tool_calls": None}]
    text = t.render(chat, tools=[{"type": "function", "function": {"name": "f"}}])
    # trim_blocks eats the newline after each block tag, lstrip_blocks the indentation before
    # one; tojson neither escapes HTML nor non-ASCII; a None-valued key is dropped (not "None")
    assert text == ('<s><|im_start|>system\n[{"type": "function", "function": {"name": "f"}}]<|im_end|>\n'
                    "<|im_start|>user\na <b> & ü<|im_end|>\n"
                    "<|im_start|>assistant\nx<|im_end|>\n"
                    "<|im_start|>assistant 2031\n")
    assert not t.render([{"role": "user", "content": "q"}], add_generation_prompt=False).endswith("2031\n")


def test_a_template_that_raises_refuses_the_chat_by_name() -> None:
    t = ChatTemplate({"default": CHATML})
    with pytest.raises(TemplateError, match="bad role critic"):
        t.render([{"role": "critic", "content": "x"}])


def test_the_sandbox_blocks_escapes() -> None:
    t = ChatTemplate({"default": "{{ messages.__class__.__mro__ }}"})
    with pytest.raises(TemplateError, match="refused"):
        t.render([{"role": "user", "content": "x"}])
    with pytest.raises(TemplateError, match="does not parse"):
        ChatTemplate({"default": "{% for %}"})


def test_tool_use_template_serves_chats_with_tools(tmp_path: Path) -> None:
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": [{"name": "default", "template": "plain"},
                                                 {"name": "tool_use", "template": "tools: {{ tools|length }}"}],
                               "bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>"}))
    t = ChatTemplate.from_file(cfg)
    assert t.special_tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    assert t.render([{"role": "user", "content": "q"}]) == "plain"
    assert t.render([{"role": "user", "content": "q"}], [{"type": "function", "function": {"name": "f"}}]) \
        == "tools: 1"


def test_jinja_file_takes_special_tokens_from_its_config(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("{{ bos_token }}{{ messages[0].content }}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<B>"}))
    assert ChatTemplate.from_file(tmp_path / "chat_template.jinja").render([{"role": "user", "content": "hi"}]) \
        == "<B>hi"


@pytest.mark.parametrize("content", ["{}", "not json", json.dumps({"chat_template": 3})])
def test_files_without_a_template_are_named(tmp_path: Path, content: str) -> None:
    path = tmp_path / "tokenizer_config.json"
    path.write_text(content)
    with pytest.raises(TemplateError, match=r"tokenizer_config\.json"):
        ChatTemplate.from_file(path)
    with pytest.raises(TemplateError, match="cannot read"):
        ChatTemplate.from_file(tmp_path / "missing.json")


def test_the_tiny_models_template_shows_tools_calls_and_results() -> None:
    t = ChatTemplate({"default": CHAT_TEMPLATE})
    tool = {"type": "function", "function": {"name": "f"}}
    call = [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]
    text = t.render([{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": call},
                     {"role": "tool", "tool_call_id": "c1", "content": "42"}], [tool])
    assert text == ('system: tools: [{"type": "function", "function": {"name": "f"}}]\n'
                    "user: q\n"
                    'assistant:  calls: [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]\n'
                    "tool: 42 (result of c1)\nassistant:")


def test_chats_in_the_ir_resolve_step_outputs_and_render_neutrally_in_the_simulator() -> None:
    chat = as_chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": ["about ", Out("plan")]},
                    {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}],
                   tools=[{"type": "function", "function": {"name": "f"}}])
    assert refs((chat,)) == ("plan",)
    live = resolve((chat,), lambda step: (Lit("the plan"),))[0]
    assert isinstance(live, Chat) and live.turns[1] == Turn("user", (Lit("about "), Lit("the plan")), {})
    assert chat_messages(live)[1:] == [{"role": "user", "content": "about the plan"},
                                       {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}]
    sim = resolve((chat,), lambda step: (Segment(7, 5),))[0]
    with pytest.raises(ValueError, match="segment"):
        chat_messages(sim)
    parts = chat_parts(sim)
    assert parts[0] == Lit('<|tools|>\n[{"type": "function", "function": {"name": "f"}}]\n<|system|>\nbe brief\n'
                           "<|user|>\nabout ")
    assert parts[1] == Segment(7, 5)
    assert parts[2] == Lit('\n<|assistant|>\n{"tool_calls": [{"id": "c"}]}\n<|assistant|>\n')
    tok = SimTokenizer()
    assert tok.encode((sim,), None) == tok.encode(parts, None)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=8)
sources = st.sampled_from([CHATML, CHAT_TEMPLATE, "{{ messages[0]['content'] + 1 }}", "{% if %}", "{{ x.y.z }}"])


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.fixed_dictionaries({}, optional={"chat_template": sources | json_values, "bos_token": json_values,
                                                  "eos_token": json_values}) | json_values,
       raw=st.binary(max_size=40), messages=st.lists(st.dictionaries(st.sampled_from(["role", "content", "x"]),
                                                                     json_values, max_size=3), max_size=3))
def test_any_config_and_chat_give_a_rendering_or_a_template_error(tmp_path: Path, config: object, raw: bytes,
                                                                  messages: list) -> None:
    path = tmp_path / "tokenizer_config.json"
    for content in (json.dumps(config).encode(), raw):
        path.write_bytes(content)
        try:
            template = ChatTemplate.from_file(path)
        except TemplateError:
            continue
        with contextlib.suppress(TemplateError):
            assert isinstance(template.render(messages), str)
