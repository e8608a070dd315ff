"""The response path's reading of an engine's answer: usage from JSON and SSE bodies, split
anywhere across chunks, and never an exception on a body that is not what it claims."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.picker.tally import ResponseTally

USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17, "prompt_tokens_details": {"cached_tokens": 8}}


def sse(events: list[dict], usage: dict | None) -> bytes:
    out = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    if usage is not None:
        out += b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n"
    return out + b"data: [DONE]\n\n"


def token(i: int) -> dict:
    return {"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]}


def test_a_json_answer_ends_with_its_usage() -> None:
    t = ResponseTally(200, False, started=1.0, headers_at=1.5)
    body = orjson.dumps({"choices": [{"text": "ok", "finish_reason": "stop"}], "usage": USAGE})
    t.feed(body[:7], 1.6)
    t.feed(body[7:], 1.7)
    ended = t.end(2.0)
    assert ended.error is None and ended.outcome is not None
    o = ended.outcome
    assert (o.output_tokens, o.prompt_tokens, o.cached_tokens, o.finish_reason) == (5, 12, 8, "stop")
    assert (o.started, o.first_token) == (1.0, 1.5)


def test_llama_server_timings_give_the_cached_tokens() -> None:
    t = ResponseTally(200, False, 0.0, 0.1)
    t.feed(orjson.dumps({"choices": [{"text": "x"}], "usage": {"completion_tokens": 1, "prompt_tokens": 9},
                         "timings": {"cache_n": 6}}), 0.2)
    o = t.end(0.3).outcome
    assert o is not None and (o.output_tokens, o.cached_tokens) == (1, 6)


def test_a_stream_split_mid_line_counts_its_usage_and_first_byte() -> None:
    body = sse([token(i) for i in range(3)], USAGE)
    t = ResponseTally(200, True, 0.0, 0.5)
    for i, cut in enumerate(range(0, len(body), 11)):
        t.feed(body[cut:cut + 11], 1.0 + i)
    o = t.end(99.0).outcome
    assert o is not None and (o.output_tokens, o.prompt_tokens, o.cached_tokens) == (5, 12, 8)
    assert o.first_token == 1.0  # the first body byte, not the headers


def test_a_stream_without_usage_counts_its_events() -> None:
    t = ResponseTally(200, True, 0.0, 0.0)
    t.feed(sse([token(i) for i in range(7)], None), 1.0)
    o = t.end(2.0).outcome
    assert o is not None and o.output_tokens == 7 and o.prompt_tokens == 0


def test_an_error_status_is_the_engines_error_with_its_message() -> None:
    t = ResponseTally(400, False, 0.0, 0.0)
    t.feed(b'{"error": {"message": "prompt too long", "code": 400}}', 0.1)
    ended = t.end(0.2)
    assert ended.outcome is None and ended.error is not None
    assert "prompt too long" in str(ended.error) and not ended.error.retryable
    t = ResponseTally(503, False, 0.0, 0.0)
    t.feed(b"upstream connect error", 0.1)
    err = t.end(0.2).error
    assert err is not None and err.retryable and "upstream connect error" in str(err)


def test_usage_of_the_wrong_shape_falls_back_to_counted_events() -> None:
    t = ResponseTally(200, True, 0.0, 0.0)
    t.feed(b'data: {"choices": [], "usage": {"completion_tokens": "many"}}\n\ndata: {"usage": 1e999}\n\n', 0.1)
    o = t.end(0.2).outcome
    assert o is not None and o.output_tokens == 2


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.sampled_from([200, 404, 500]), st.lists(st.binary(max_size=64), max_size=8))
def test_any_body_ends_without_an_exception(stream: bool, status: int, chunks: list[bytes]) -> None:
    t = ResponseTally(status, stream, 0.0, 0.0)
    for c in chunks:
        t.feed(c, 1.0)
    ended = t.end(2.0)
    assert (ended.outcome is None) == (status >= 400) == (ended.error is not None)
    if ended.outcome is not None:
        assert min(ended.outcome.output_tokens, ended.outcome.prompt_tokens, ended.outcome.cached_tokens) >= 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=5), st.integers(1, 40))
def test_usage_survives_any_split(values: list[int], step: int) -> None:
    usage = {"prompt_tokens": values[0], "completion_tokens": values[-1]}
    body = sse([token(i) for i in range(len(values))], usage)
    t = ResponseTally(200, True, 0.0, 0.0)
    for cut in range(0, len(body), step):
        t.feed(body[cut:cut + step], 1.0)
    o = t.end(2.0).outcome
    assert o is not None and (o.prompt_tokens, o.output_tokens) == (values[0], values[-1])
