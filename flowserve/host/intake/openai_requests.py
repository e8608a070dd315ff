"""OpenAI request bodies (`/v1/completions`, `/v1/chat/completions`), strictly typed.

As the OpenAI API does, a field of the wrong type is refused (`"max_tokens": "10"`,
`"stream": "yes"`, `[true, false]` as token ids), never coerced, and so is a field
flowserve does not implement: each gets a 400 naming it. Nothing is accepted and then
dropped. Passed to the engine: the sampling fields, `stop`, `seed`, `user`,
`logit_bias`, `logprobs`/`top_logprobs`, and for chats `tools`, `tool_choice`,
`parallel_tool_calls` and `response_format` (tool parameters and JSON schemas are
checked as JSON schemas); llama.cpp's and vLLM's `top_k`, `min_p`, `repeat_penalty` and
`ignore_eos` as extensions. `n` must be 1 (see docs/serving.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import jsonschema_rs
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from flowserve.graph.prompt import Chat, Lit, Turn
from flowserve.host.intake.openai_api import MAX_DEPTH, APIError, json_depth

Finite = Annotated[float, Field(allow_inf_nan=False)]
TokenId = Annotated[str, Field(pattern=r"^\d{1,10}$")]  # logit_bias keys
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function and schema names

# engine request fields taken from the body as they are (chats add CHAT_PARAMS)
PARAMS = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "user",
          "top_k", "min_p", "repeat_penalty", "ignore_eos", "logprobs")
CHAT_PARAMS = ("top_logprobs", "response_format", "tool_choice", "parallel_tool_calls")


class _StrictBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


# the meta-schema of draft 2020-12 compiled once by jsonschema-rs (Rust): ~25 µs a tool's schema, where
# Python's jsonschema took 2-20 ms (its $dynamicRef resolution), seconds for a chat with many tools
_META = jsonschema_rs.Draft202012Validator(Draft202012Validator.META_SCHEMA)


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema (draft 2020-12, which OpenAI's tools and response formats use)."""
    if json_depth(schema) > MAX_DEPTH:  # request bodies stop at MAX_DEPTH; the validator recurses natively
        raise ValueError(f"not a valid JSON schema: nested deeper than {MAX_DEPTH} levels")
    for e in _META.iter_errors(schema):
        where = "/".join(str(p) for p in e.instance_path)
        raise ValueError(f"not a valid JSON schema: {e.message}" + (f" (at {where})" if where else ""))
    return schema


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(f"{name!r} must be 1 to 64 letters, digits, underscores or dashes")
    return name


class StreamOptions(_StrictBody):
    include_usage: bool = False


class _Request(_StrictBody):
    model: str = Field(min_length=1)
    stream: bool = False
    n: int = Field(1, ge=1, le=1)
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: Finite | None = Field(None, ge=0, le=2)
    top_p: Finite | None = Field(None, ge=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: Finite | None = Field(None, ge=-2, le=2)
    frequency_penalty: Finite | None = Field(None, ge=-2, le=2)
    logit_bias: dict[TokenId, Annotated[Finite, Field(ge=-100, le=100)]] | None = None
    user: str | None = None
    top_k: int | None = Field(None, ge=0)
    min_p: Finite | None = Field(None, ge=0, le=1)
    repeat_penalty: Finite | None = Field(None, ge=0)
    ignore_eos: bool | None = None

    _body: dict[str, Any] = PrivateAttr(default_factory=dict)  # as sent: passed on unchanged

    def model_post_init(self, context: Any) -> None:
        """`parse` validates with the body as sent in the context: the request keeps it."""
        if isinstance(context, dict):
            self._body = context.get("body", {})

    @model_validator(mode="after")
    def _stream_options_need_a_stream(self) -> _Request:
        if self.stream_options is not None and not self.stream:
            raise _FieldError("stream_options", "is only allowed when stream is true")
        return self

    def params(self) -> dict[str, Any]:
        """The fields the engine receives, exactly as sent (those set)."""
        names = PARAMS + (CHAT_PARAMS if isinstance(self, ChatRequest) else ())
        return {k: v for k in names if (v := self._body.get(k)) is not None}

    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def max_output_tokens(self) -> int | None:
        """The output cap the request asked for (None: the gateway's default)."""
        return self.max_tokens


class CompletionRequest(_Request):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=5)


class ContentPart(_StrictBody):
    type: Literal["text"]
    text: str


class FunctionCall(_StrictBody):
    name: str
    arguments: str


class ToolCall(_StrictBody):
    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(_StrictBody):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None  # an assistant message sent back as it came

    @model_validator(mode="after")
    def _fields_fit_the_role(self) -> ChatMessage:
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry a tool_call_id")
        if self.role != "assistant" and (self.tool_calls is not None or self.refusal is not None):
            raise ValueError("only assistant messages carry tool_calls or a refusal")
        if self.content is None and self.role != "assistant":
            raise ValueError(f"a {self.role} message needs content")
        return self

    def turn(self) -> Turn:
        """The message as a chat turn: text parts joined into one text."""
        c = self.content
        text = c if c is None or isinstance(c, str) else "".join(p.text for p in c)
        fields = self.model_dump(exclude={"role", "content"}, exclude_none=True)
        return Turn(self.role, None if text is None else (Lit(text),) if text else (), fields)


class FunctionDef(_StrictBody):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    _name = field_validator("name")(check_name)
    _parameters = field_validator("parameters")(lambda v: None if v is None else check_schema(v))


class Tool(_StrictBody):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_StrictBody):
    name: str


class NamedToolChoice(_StrictBody):
    type: Literal["function"]
    function: NamedFunction


class JSONSchemaFormat(_StrictBody):
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None

    _name = field_validator("name")(check_name)
    _schema = field_validator("schema_")(lambda v: None if v is None else check_schema(v))


class TextFormat(_StrictBody):
    type: Literal["text"]


class JSONObjectFormat(_StrictBody):
    type: Literal["json_object"]


class SchemaFormat(_StrictBody):
    type: Literal["json_schema"]
    json_schema: JSONSchemaFormat


ResponseFormat = Annotated[TextFormat | JSONObjectFormat | SchemaFormat, Field(discriminator="type")]


class ChatRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None

    def max_output_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens  # the newer name first, as OpenAI reads them

    @model_validator(mode="after")
    def _coherent(self) -> ChatRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise _FieldError("max_completion_tokens", "give max_completion_tokens or max_tokens (its older name), "
                                                       "not both")
        if self.top_logprobs is not None and not self.logprobs:
            raise _FieldError("top_logprobs", "needs logprobs: true")
        names = [t.function.name for t in self.tools or ()]
        if len(set(names)) < len(names):
            raise _FieldError("tools", "function names must be unique")
        if self.tool_choice is not None or self.parallel_tool_calls is not None:
            if not self.tools:
                field = "tool_choice" if self.tool_choice is not None else "parallel_tool_calls"
                raise _FieldError(field, "is only allowed when tools are given")
            if isinstance(self.tool_choice, NamedToolChoice) and self.tool_choice.function.name not in names:
                raise _FieldError("tool_choice", f"names the function {self.tool_choice.function.name!r}, "
                                                 f"which is not among the tools")
        return self

    def chat(self) -> Chat:
        """The messages and tools as the workflow IR's chat (tools exactly as sent)."""
        return Chat(tuple(m.turn() for m in self.messages), tuple(self._body.get("tools") or ()))


class _FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _where(loc: tuple[Any, ...], body: Any) -> str:
    """A pydantic error location as the field path the client wrote: the places that
    exist in the body (and a missing field at the end); union members' tags are skipped."""
    out, node = [], body
    for i, x in enumerate(loc):
        if (isinstance(node, dict) and x in node) or (isinstance(node, list) and isinstance(x, int)
                                                      and 0 <= x < len(node)):
            node = node[x]
            out.append(str(x))
        elif i == len(loc) - 1:
            out.append(str(x))
    return ".".join(out)


def parse(model: type[_Request], body: Any) -> Any:
    """The request, or an `APIError` (400) naming the first field at fault."""
    if not isinstance(body, dict):
        raise APIError(400, "the request body must be a JSON object")
    try:
        req = model.model_validate(body, context={"body": body})
    except ValidationError as e:
        errors = e.errors()
        unknown = [x for x in errors if x["type"] == "extra_forbidden"]
        if unknown:
            where = _where(unknown[0]["loc"], body)
            raise APIError(400, f"{where}: this field is not supported by flowserve "
                                "(supported fields: docs/serving.md)", param=where) from None
        own = next((x for x in errors if isinstance((x.get("ctx") or {}).get("error"), _FieldError)), None)
        if own is not None:
            err = own["ctx"]["error"]
            raise APIError(400, f"{err.field}: {err}", param=err.field) from None
        err = max(errors, key=lambda x: len(x["loc"]))  # a union's deepest miss says most
        where = _where(err["loc"], body) or None
        msg = "required field is missing" if err["type"] == "missing" else err["msg"].removeprefix("Value error, ")
        raise APIError(400, f"{where}: {msg}" if where else msg, param=where) from None
    return req
