"""Errors of LLM-in-SQL statements (each message names the problem; CLI exit 2)."""

from __future__ import annotations

from flowserve.errors import FlowserveError


class SQLInputError(FlowserveError):
    """A statement, template, table or argument that cannot run as given."""


class OutputError(ValueError):
    """An LLM answer that does not fit the requested structure (that row's error)."""


class StatementFailed(FlowserveError):
    """A row failed and the statement runs with `on_error="fail"`."""


class StatementCancelled(FlowserveError):
    """Ctrl-C (or a caller) cancelled the statement; outstanding calls were cancelled."""
