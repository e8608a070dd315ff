"""Workload kinds: each is a config model (the YAML `kind:`) that builds a `Workload`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from flowserve.config import Strict, load_mapping, validate
from flowserve.errors import ConfigError
from flowserve.workloads import text2sql
from flowserve.workloads.base import QuerySpec, Workload
from flowserve.workloads.dag import DagConfig
from flowserve.workloads.trace import read_trace


class Arrivals(Strict):
    rate: float = Field(gt=0)
    seed: int = 0
    arrival: Literal["poisson", "gamma"] = "poisson"
    cv: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _gamma_needs_cv(self) -> Arrivals:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        return self


class Text2SQLConfig(Arrivals):
    kind: Literal["text2sql"]
    trace: Literal["financial", "formula1", "mixed"] = "mixed"
    queries: int = Field(gt=0)
    candidates: int = Field(2, ge=2)
    max_rounds: int = Field(10, ge=0)
    exec_mean_s: float = Field(0.3, gt=0)
    error_prob: float | None = Field(None, ge=0, lt=1)

    def build(self) -> Workload:
        params = text2sql.Text2SQLParams(self.candidates, self.max_rounds, self.exec_mean_s,
                                         self.error_prob)
        return text2sql.synthetic(self.trace, self.rate, self.queries, self.seed, self.arrival,
                                  self.cv, params)


class ChessTraceConfig(Arrivals):
    kind: Literal["chess_trace"]
    file: str
    queries: int | None = Field(None, gt=0)
    max_rounds: int = Field(10, ge=0)

    def build(self) -> Workload:
        params = text2sql.Text2SQLParams(max_rounds=self.max_rounds)
        return text2sql.chess_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                    self.cv, params)


class TraceConfig(Strict):
    kind: Literal["trace"]
    file: str

    def build(self) -> Workload:
        return read_trace(self.file)


WORKLOAD_KINDS: dict[str, type[Strict]] = {
    "text2sql": Text2SQLConfig,
    "chess_trace": ChessTraceConfig,
    "trace": TraceConfig,
    "dag": DagConfig,
}

BUILTIN_WORKLOADS: dict[str, dict[str, Any]] = {
    "text2sql": {"kind": "text2sql", "trace": "mixed", "rate": 0.5, "queries": 200},
    **{f"text2sql-{t}": {"kind": "text2sql", "trace": t, "rate": 0.5, "queries": 200}
       for t in ("financial", "formula1", "mixed")},
    **{name: {"kind": "chess_trace", "file": name, "rate": 0.5}
       for name in text2sql.BUILTIN_TRACE_FILES},
}


def workload_config(data: Mapping[str, Any], source: str) -> Any:
    kind = data.get("kind")
    if kind not in WORKLOAD_KINDS:
        raise ConfigError(f"{source}: kind: unknown workload kind {kind!r}; "
                          f"known: {', '.join(WORKLOAD_KINDS)}")
    return validate(WORKLOAD_KINDS[kind], dict(data), source)


def load_workload(ref: str, overrides: Mapping[str, Any] | None = None) -> Workload:
    """A built-in workload name, a workload YAML, or a recorded JSONL trace."""
    if ref.endswith(".jsonl"):
        data, source = {"kind": "trace", "file": ref}, ref
    else:
        data, source = load_mapping(ref, BUILTIN_WORKLOADS, "workload")
    if overrides:
        data = {**data, **overrides}
    return workload_config(data, source).build()


__all__ = ["BUILTIN_WORKLOADS", "WORKLOAD_KINDS", "QuerySpec", "Workload", "load_workload"]
