"""A model's own chat template, rendered locally the way Hugging Face renders it.

    template = ChatTemplate.from_file(Path("tokenizer_config.json"))
    text = template.render(messages, tools)     # what vLLM or SGLang would run

Rendering follows `transformers.utils.chat_template_utils` (`_compile_jinja_template`,
`render_jinja_template`): jinja2's immutable sandbox with `trim_blocks` and
`lstrip_blocks`, the loop-control extension, `{% generation %}` blocks, a `tojson` that
does not escape HTML, `raise_exception`, `strftime_now`, `namespace` and `dict`; the
tokenizer's special tokens (`bos_token`, `eos_token`, ...) as variables; `tools` (None
when there are none) and `add_generation_prompt`; message keys whose value is None are
dropped. A `tokenizer_config.json` may name several templates: `tool_use` serves chats
with tools, `default` the rest. The text is then tokenized without adding special tokens,
as `apply_chat_template(tokenize=True)` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from flowserve.errors import FlowserveError

SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class TemplateError(FlowserveError):
    """A chat template could not be loaded, or refused to render a chat (its own
    `raise_exception`, or a jinja error)."""


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks;
    rendering keeps the body as it is."""

    tags = {"generation"}  # noqa: RUF012 (jinja's extension API)

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _environment(now: Callable[[], datetime]) -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    env.globals["dict"] = dict
    return env


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


class ChatTemplate:
    def __init__(self, templates: Mapping[str, str], special_tokens: Mapping[str, str] | None = None,
                 now: Callable[[], datetime] = datetime.now) -> None:
        """templates: name → jinja source (one named `default` at least); special_tokens:
        `bos_token` etc.; now: the clock behind `strftime_now` (Llama 3 templates date the
        system prompt)."""
        if "default" not in templates:
            raise TemplateError(f"no default chat template among {sorted(templates)}")
        env = _environment(now)
        try:
            self._compiled = {name: env.from_string(src) for name, src in templates.items()}
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"the chat template does not parse: {e} (line {e.lineno})") from None
        self.special_tokens = dict(special_tokens or {})

    @classmethod
    def from_file(cls, path: Path, now: Callable[[], datetime] = datetime.now) -> ChatTemplate:
        """A `tokenizer_config.json` (its `chat_template`, one or named ones, and special
        tokens), or a `.jinja` file (special tokens from a `tokenizer_config.json` beside it)."""
        path = Path(path)
        try:
            if path.suffix == ".jinja":
                config_path = path.with_name("tokenizer_config.json")
                config = json.loads(config_path.read_text()) if config_path.is_file() else {}
                config = {**(config if isinstance(config, dict) else {}), "chat_template": path.read_text()}
            else:
                config = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TemplateError(f"cannot read the chat template {str(path)!r}: {e}") from None
        raw = config.get("chat_template") if isinstance(config, dict) else None
        if isinstance(raw, str):
            templates = {"default": raw}
        elif isinstance(raw, list) and all(isinstance(t, dict) for t in raw):
            templates = {str(t.get("name")): str(t.get("template")) for t in raw}
        else:
            raise TemplateError(f"{str(path)!r} has no chat_template")
        tokens = {k: t for k in SPECIAL_TOKENS if (t := _token_text(config.get(k))) is not None}
        return cls(templates, tokens, now)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True) -> str:
        name = "tool_use" if tools and "tool_use" in self._compiled else "default"
        plain = [{k: v for k, v in m.items() if v is not None} for m in messages]
        try:
            return self._compiled[name].render(messages=plain, tools=list(tools) if tools else None,
                                               documents=None, add_generation_prompt=add_generation_prompt,
                                               **self.special_tokens)
        except Exception as e:  # template code is the model's: any failure is its refusal of this chat
            raise TemplateError(f"the chat template refused the chat: {type(e).__name__}: {e}") from None
