"""Checks of the Python API's arguments: a wrong type or value is a `SQLInputError`
naming the argument, never a TypeError or AssertionError from deep inside."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowserve.sql.errors import SQLInputError
from flowserve.types.specs import InstanceSpec


def check_statement(query: object) -> str:
    """A statement: a non-empty string of valid Unicode (no lone surrogates)."""
    if not isinstance(query, str):
        raise SQLInputError(f"the statement must be a string, got {type(query).__name__}")
    if not query.strip():
        raise SQLInputError("the statement is empty")
    check_unicode(query, "the statement")
    return query


def check_unicode(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SQLInputError(f"{what} is not valid Unicode: lone surrogate U+{ord(text[e.start]):04X} "
                            f"at position {e.start}") from None


def check_cluster(cluster: object) -> str | tuple[InstanceSpec, ...] | None:
    if cluster is None or isinstance(cluster, str):
        if isinstance(cluster, str) and not cluster.strip():
            raise SQLInputError("connect(): cluster is empty; give a YAML path or a built-in name (paper-l4)")
        return cluster
    if isinstance(cluster, Path):
        return str(cluster)
    if isinstance(cluster, Sequence) and all(isinstance(s, InstanceSpec) for s in cluster):
        if not cluster:
            raise SQLInputError("connect(): cluster has no instances")
        return tuple(cluster)
    raise SQLInputError(f"connect(): cluster must be a YAML path, a built-in name or a list of InstanceSpec, "
                        f"got {type(cluster).__name__}")


def check_gateway(gateway: object) -> str | None:
    if gateway is None:
        return None
    if not isinstance(gateway, str) or not gateway.startswith(("http://", "https://")):
        raise SQLInputError(f"connect(): gateway must be an http(s):// URL, got {str(gateway)[:80]!r}")
    return gateway


def check_options(seed: object, max_tokens: object, on_progress: object, cache: object) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise SQLInputError(f"seed must be an integer, got {type(seed).__name__}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or not 1 <= max_tokens <= 1_000_000):
        raise SQLInputError(f"max_tokens must be an integer from 1 to 1000000, got {max_tokens!r}")
    if on_progress is not None and not callable(on_progress):
        raise SQLInputError(f"on_progress must be callable, got {type(on_progress).__name__}")
    if cache is not None and not isinstance(cache, bool | str | Path):
        raise SQLInputError(f"cache must be True, False or a file path, got {type(cache).__name__}")


def check_tables(tables: object) -> dict[str, Any]:
    if tables is None:
        return {}
    if not isinstance(tables, dict):
        raise SQLInputError(f"tables must be a dict of name → path or Arrow table, got {type(tables).__name__}")
    return tables

