"""Structured output of LLM calls: allowed answers, yes/no, numbers, JSON objects.

Each kind adds an output instruction to the prompt (after the fields) and parses the
answer; an answer that does not fit raises `OutputError` (the row's error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flowserve.sql.errors import OutputError, SQLInputError

Kind = Literal["text", "bool", "number", "choice", "json"]
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}
_WORD = re.compile(r"[A-Za-z]+")
_JSON_TYPES = {"string": str, "number": (int, float), "integer": int, "boolean": bool,
               "object": dict, "array": list}


@dataclass(frozen=True, slots=True)
class OutputSpec:
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    schema: Mapping[str, Any] = field(default_factory=dict)

    def instruction(self) -> str:
        if self.kind == "bool":
            return "Answer Yes or No."
        if self.kind == "number":
            return "Answer with a number only."
        if self.kind == "choice":
            return "Answer with exactly one of: " + ", ".join(self.choices) + "."
        if self.kind == "json":
            return "Answer with a JSON object matching this schema: " + json.dumps(self.schema, sort_keys=True)
        return ""

    def parse(self, text: str) -> Any:
        if self.kind == "bool":
            return parse_bool(text)
        if self.kind == "number":
            return parse_number(text)
        if self.kind == "choice":
            return parse_choice(text, self.choices)
        if self.kind == "json":
            return json.dumps(parse_json(text, self.schema), sort_keys=True)
        return text.strip()


def choice_spec(allowed: str) -> OutputSpec:
    """`'Positive|Negative|Neutral'` → a choice spec (empty or duplicate answers are errors)."""
    choices = tuple(c.strip() for c in str(allowed).split("|"))
    if len(choices) < 2 or any(not c for c in choices) or len({c.lower() for c in choices}) != len(choices):
        raise SQLInputError(f"LLM_CHOICE(): allowed answers must be 2+ distinct non-empty names "
                            f"separated by '|', got {allowed!r}")
    return OutputSpec("choice", choices)


def json_spec(schema_text: str) -> OutputSpec:
    try:
        schema = json.loads(schema_text)
    except (TypeError, json.JSONDecodeError) as e:
        raise SQLInputError(f"LLM_JSON(): the schema is not valid JSON: {e}") from None
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise SQLInputError("LLM_JSON(): the schema must be a JSON object schema ({\"type\": \"object\", ...})")
    return OutputSpec("json", schema=schema)


def parse_bool(text: str) -> bool:
    for w in _WORD.findall(text):
        lw = w.lower()
        if lw in _YES:
            return True
        if lw in _NO:
            return False
    raise OutputError(f"expected Yes or No, got {text[:60]!r}")


def parse_number(text: str) -> float:
    m = _NUMBER.search(text)
    if m is None:
        raise OutputError(f"expected a number, got {text[:60]!r}")
    return float(m.group())


def parse_choice(text: str, choices: tuple[str, ...]) -> str:
    """The allowed answer that appears first in the text (whole words, any case)."""
    low = text.lower()
    best: tuple[int, str] | None = None
    for c in choices:
        m = re.search(r"(?<!\w)" + re.escape(c.lower()) + r"(?!\w)", low)
        if m is not None and (best is None or m.start() < best[0]):
            best = (m.start(), c)
    if best is None:
        raise OutputError(f"expected one of {'|'.join(choices)}, got {text[:60]!r}")
    return best[1]


def parse_json(text: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The first JSON object in the text, checked against the schema's properties'
    types, `required` and `enum`."""
    start = text.find("{")
    while start >= 0:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            _check(obj, schema)
            return obj
        start = text.find("{", start + 1)
    raise OutputError(f"expected a JSON object, got {text[:60]!r}")


def _check(obj: dict[str, Any], schema: Mapping[str, Any]) -> None:
    for key in schema.get("required", ()):
        if key not in obj:
            raise OutputError(f"JSON answer lacks required field {key!r}")
    for key, prop in (schema.get("properties") or {}).items():
        if key not in obj or not isinstance(prop, Mapping):
            continue
        want = _JSON_TYPES.get(prop.get("type", ""))
        v = obj[key]
        if want is not None and (not isinstance(v, want) or (want is not bool and isinstance(v, bool))):
            raise OutputError(f"JSON field {key!r} is not of type {prop['type']}")
        if "enum" in prop and v not in prop["enum"]:
            raise OutputError(f"JSON field {key!r} = {v!r} is not one of {prop['enum']}")
