"""Failures answer clients through one table: every kind has its HTTP status, type and
code, and the reason text travels as the message (never matched)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flowserve.engines.answer import EngineError, error_from_body, status_kind
from flowserve.errors import FailureKind, RequestError, Unanswerable, WorkflowError
from flowserve.host.intake.openai_api import FAILURES, failure_error


def test_every_failure_kind_has_an_http_answer():
    assert set(FAILURES) == set(FailureKind)
    for kind, f in FAILURES.items():
        assert 400 <= f.status < 600 and f.code, kind
        assert (f.status >= 500) == (f.type == "server_error"), kind


def test_the_answer_follows_the_kind_not_the_text():
    # the text of a context overflow under another kind no longer decides the status
    err = failure_error(FailureKind.ENGINE_ERROR, "prompt exceeds the model's context; text2sql: no instance is up")
    assert (err.status, err.code) == (502, "engine_error")
    err = failure_error(FailureKind.CONTEXT_OVERFLOW, "prompt of 9000 tokens exceeds the model's context")
    assert (err.status, err.code, err.param) == (400, "context_length_exceeded", "prompt")
    assert err.message == "prompt of 9000 tokens exceeds the model's context"
    assert failure_error(FailureKind.UNANSWERABLE, "no table fits").status == 422
    assert failure_error(FailureKind.SHUTDOWN, "drained").status == 503
    assert failure_error(None, None).status == 500  # no kind: a bug, said so


@given(st.integers(100, 599))
def test_engine_statuses_map_to_kinds(status):
    kind = status_kind(status)
    if status == 408:
        assert kind is FailureKind.TIMEOUT
    elif 400 <= status < 500:
        assert kind is FailureKind.ENGINE_REJECTED
    else:
        assert kind is FailureKind.ENGINE_ERROR
    assert error_from_body({"error": {"message": "no"}}, status).kind is kind


def test_exceptions_carry_their_kind():
    assert Unanswerable("x").kind is FailureKind.UNANSWERABLE
    assert WorkflowError("x").kind is FailureKind.APP_ERROR
    assert RequestError("x").kind is FailureKind.BAD_REQUEST
    assert EngineError("x", retryable=True).kind is FailureKind.ENGINE_ERROR
    assert EngineError("x", retryable=True, kind=FailureKind.TIMEOUT).kind is FailureKind.TIMEOUT
