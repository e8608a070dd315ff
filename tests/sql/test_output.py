"""Structured output parsing, with a fuzz test: any text either parses or raises OutputError."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.sql.errors import OutputError, SQLInputError
from flowserve.sql.output import choice_spec, json_spec, parse_bool, parse_choice, parse_json, parse_number


def test_parsers() -> None:
    assert parse_bool("Yes, it is.") is True and parse_bool("no") is False
    assert parse_number("Score: 4.5 out of 5") == 4.5
    assert parse_choice("I think it's negative overall", ("Positive", "Negative", "Neutral")) == "Negative"
    assert parse_json('Sure: {"a": 1, "b": "x"} done', {"required": ["a"], "properties": {"a": {"type": "integer"}}}) \
        == {"a": 1, "b": "x"}
    with pytest.raises(OutputError):
        parse_number("none")
    with pytest.raises(OutputError, match="required"):
        parse_json('{"b": 1}', {"required": ["a"]})
    with pytest.raises(SQLInputError):
        choice_spec("Positive|")
    with pytest.raises(SQLInputError):
        json_spec("{not json")


SPECS = [choice_spec("Positive|Negative|Neutral"), json_spec(json.dumps(
    {"type": "object", "required": ["s"], "properties": {"s": {"type": "string", "enum": ["a", "b"]}}}))]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_every_parser_returns_or_raises_output_error(text: str) -> None:
    for fn in (parse_bool, parse_number):
        with contextlib.suppress(OutputError):
            fn(text)
    for spec in SPECS:
        with contextlib.suppress(OutputError):
            spec.parse(text)
