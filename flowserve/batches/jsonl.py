"""A batch's input file: JSONL, one request a line, `{custom_id, method, url, body}` (as
OpenAI's Batch API and `vllm run-batch` read it).

`parse_input` never raises on what a tenant uploads: each line is a request to run or a
`LineError` naming its line number and, when it can be read, its `custom_id` — those go
to the batch's error file and the rest run. Blank lines are skipped (their numbers still
count, so an error's number is the line an editor shows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

MAX_CUSTOM_ID = 512  # characters; OpenAI's limit


@dataclass(frozen=True, slots=True)
class BatchLine:
    """A request to run: its line number, custom_id and body (JSON, as sent)."""

    line: int
    custom_id: str
    body: bytes


@dataclass(frozen=True, slots=True)
class LineError:
    """A line that cannot run, and why."""

    line: int
    custom_id: str | None
    message: str
    code: str = "invalid_request"

    def error(self) -> dict[str, Any]:
        return {"code": self.code, "message": f"line {self.line}: {self.message}"}


@dataclass(frozen=True, slots=True)
class ParsedInput:
    lines: tuple[BatchLine, ...]
    errors: tuple[LineError, ...]

    @property
    def total(self) -> int:
        return len(self.lines) + len(self.errors)


def count_lines(data: bytes) -> int:
    """Requests a file holds: its lines that are not blank."""
    return sum(1 for raw in data.split(b"\n") if raw.strip())


def parse_line(number: int, raw: bytes, endpoint: str) -> BatchLine | LineError:
    """One non-blank line."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        return LineError(number, None, f"not valid JSON ({e})")
    if not isinstance(obj, dict):
        return LineError(number, None, f"expected a JSON object, got {type(obj).__name__}")
    cid = obj.get("custom_id")
    if not isinstance(cid, str) or not cid or len(cid) > MAX_CUSTOM_ID:
        return LineError(number, None, f"custom_id: expected a string of 1 to {MAX_CUSTOM_ID} characters")
    problem = envelope_problem(obj, endpoint)
    if problem is not None:
        return LineError(number, cid, problem)
    return BatchLine(number, cid, orjson.dumps(obj["body"]))


def envelope_problem(obj: Mapping[str, Any], endpoint: str) -> str | None:
    """What is wrong with a line's fields beyond its custom_id (None: nothing)."""
    unknown = sorted(set(obj) - {"custom_id", "method", "url", "body"})
    if unknown:
        return f"{unknown[0]}: unknown field (a line has custom_id, method, url and body)"
    if obj.get("method") != "POST":
        return f"method: expected \"POST\", got {obj.get('method')!r}"
    if obj.get("url") != endpoint:
        return f"url: expected the batch's endpoint {endpoint!r}, got {obj.get('url')!r}"
    body = obj.get("body")
    if not isinstance(body, dict):
        return "body: expected a JSON object (the request's body)"
    if body.get("stream") is True:
        return "body.stream: a batch's requests are answered whole; leave stream out"
    return None


def parse_input(data: bytes, endpoint: str) -> ParsedInput:
    """Every line of an input file, as requests to run and errors; a custom_id used twice
    is an error on its later lines (answers are matched to requests by it)."""
    lines: list[BatchLine] = []
    errors: list[LineError] = []
    seen: set[str] = set()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        parsed = parse_line(number, raw, endpoint)
        cid = parsed.custom_id
        if cid in seen:
            parsed = LineError(number, cid, f"custom_id {cid!r} is used by an earlier line; each request needs "
                                            "its own")
        elif cid is not None:
            seen.add(cid)
        if isinstance(parsed, LineError):
            errors.append(parsed)
        else:
            lines.append(parsed)
    return ParsedInput(tuple(lines), tuple(errors))
