"""The input file's parser: each line a request or an error naming its line and custom_id;
it never raises on what a tenant uploads (fuzzed)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.batches.jsonl import BatchLine, LineError, count_lines, parse_input

EP = "/v1/chat/completions"


def req(cid: object, **over: object) -> bytes:
    return orjson.dumps({"custom_id": cid, "method": "POST", "url": EP, "body": {"model": "m"}, **over})


def test_lines_and_errors_by_line_number() -> None:
    data = b"\n".join([req("a"), b"", b"[1, 2]", req("b", method="GET"), req("a"), req("c", body=[]),
                       req("d", extra=1), req("e")]) + b"\n"
    parsed = parse_input(data, EP)
    assert [(x.line, x.custom_id) for x in parsed.lines] == [(1, "a"), (8, "e")]
    assert parsed.lines[0].body == b'{"model":"m"}'
    assert [(e.line, e.custom_id) for e in parsed.errors] == [(3, None), (4, "b"), (5, "a"), (6, "c"), (7, "d")]
    assert "method" in parsed.errors[1].message and "earlier line" in parsed.errors[2].message
    assert parsed.errors[4].error() == {"code": "invalid_request",
                                        "message": "line 7: extra: unknown field (a line has custom_id, method, "
                                                   "url and body)"}
    assert parsed.total == 7 == count_lines(data)


def test_a_custom_id_of_an_erroneous_line_is_taken_too() -> None:
    parsed = parse_input(req("x", url="/v1/completions") + b"\n" + req("x"), EP)
    assert parsed.lines == () and [e.line for e in parsed.errors] == [1, 2]


line = st.one_of(
    st.binary(max_size=40),
    st.builds(req, st.one_of(st.text(max_size=6), st.integers(-5, 5), st.none()),
              method=st.sampled_from(["POST", "GET", 1]), url=st.sampled_from([EP, "/v1/completions"]),
              body=st.one_of(st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2), st.text(max_size=3))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(line, max_size=12), st.sampled_from([b"\n", b"\r\n"]))
def test_fuzz_every_non_blank_line_is_a_request_or_an_error(lines: list[bytes], sep: bytes) -> None:
    data = sep.join(lines)
    parsed = parse_input(data, EP)
    numbered = [x.line for x in parsed.lines] + [e.line for e in parsed.errors]
    assert len(numbered) == len(set(numbered)) == parsed.total == count_lines(data)
    assert all(isinstance(x, BatchLine) and orjson.loads(x.body) is not None for x in parsed.lines)
    assert all(isinstance(e, LineError) and e.message for e in parsed.errors)
    ids = [x.custom_id for x in parsed.lines]
    assert len(ids) == len(set(ids))
