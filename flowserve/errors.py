"""Errors that carry a message meant for the user (CLI exit code 2, HTTP 4xx), and the
kinds of failure that cross the core's boundary.

A failure that leaves the place it happened — an engine's answer (`CallFailed`), a
tokenization (`Tokenized`), a tool (`OpFinished`), a step's result (`NodeResult`), a
query's end (`QueryFailed`, the gateway's `QueryResult`) — carries a `FailureKind`
beside its human-readable reason; whoever answers a client maps the kind (never the
text) to a status, as the gateway does with one table (`gateway.openai_api.FAILURES`).
An exception raised inside a workflow says its kind by its class (`kind`)."""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    """Why something failed, as plain data (its value is what JSON bodies show)."""

    BAD_REQUEST = "bad_request"  # the request cannot run as given (empty prompt, bad input)
    CONTEXT_OVERFLOW = "context_overflow"  # a prompt longer than the model's context or KV capacity
    NO_INSTANCE = "no_instance"  # no instance is up to serve it
    ENGINE_ERROR = "engine_error"  # an engine failed (after retries and re-dispatch)
    ENGINE_REJECTED = "engine_rejected"  # an engine refused the request (a 4xx answer)
    TIMEOUT = "timeout"  # an engine, a tool or the query ran out of time
    CANCELLED = "cancelled"  # its client went away, or cancelled it
    LIMIT = "limit"  # a configured limit refused it
    SHED = "shed"  # a sheddable request that no instance is predicted to serve within its SLOs
    TOOL_ERROR = "tool_error"  # a tool op failed (its workflow reads the error and may go on)
    APP_ERROR = "app_error"  # the workflow's own code failed
    UNANSWERABLE = "unanswerable"  # the application declares it cannot answer (e.g. no table fits)
    SHUTDOWN = "shutdown"  # the gateway shut down before it finished
    INTERNAL = "internal"  # a bug: the scheduler failed on it


class FlowserveError(Exception):
    """Base class: the message names the problem precisely; `kind` says what failed when
    the error ends a query (raised inside a workflow: the workflow's own failure)."""

    kind: FailureKind = FailureKind.APP_ERROR


class ConfigError(FlowserveError):
    """Malformed or inconsistent configuration (cluster, workload, policy)."""

    kind = FailureKind.BAD_REQUEST


class WorkflowError(FlowserveError):
    """A workflow graph that cannot run: cycle, unknown dependency, duplicate node."""


class Unanswerable(WorkflowError):
    """The application cannot answer this request (its reason says why): a 422, not a
    server error."""

    kind = FailureKind.UNANSWERABLE


class RequestError(FlowserveError):
    """A request the cluster cannot serve as given (prompt longer than the context, ...)."""

    kind = FailureKind.BAD_REQUEST
