"""Workload kinds: each is a config model (the YAML `kind:`) that builds a `Workload`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, model_validator

from flowserve.errors import ConfigError
from flowserve.limits import MAX_CANDIDATES, MAX_PROMPT_TOKENS, MAX_QUERIES, Candidates, Queries, Rounds, Seed
from flowserve.schema import Strict, load_mapping, validate
from flowserve.workloads import agent_trace, preble, text2sql
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.dag import DagConfig
from flowserve.workloads.teola import TeolaConfig
from flowserve.workloads.trace import read_trace

# Gamma gaps have shape 1/cv²: a cv outside [0.01, 100] under- or overflows the draw.
CV = Field(None, ge=0.01, le=100)


class Arrivals(Strict):
    rate: float = Field(gt=0)
    seed: Seed = 0
    arrival: Literal["poisson", "gamma"] = "poisson"
    cv: float | None = CV

    @model_validator(mode="after")
    def _gamma_needs_cv(self) -> Arrivals:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        return self


class Text2SQLConfig(Arrivals):
    kind: Literal["text2sql"]
    trace: Literal["financial", "formula1", "mixed"] = "mixed"
    queries: Queries
    candidates: Candidates = 2
    max_rounds: Rounds = 10
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
    queries: Queries | None = None
    max_rounds: Rounds = 10

    def build(self) -> Workload:
        params = text2sql.Text2SQLParams(max_rounds=self.max_rounds)
        return text2sql.chess_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                    self.cv, params)


class AgentTraceConfig(Arrivals):
    """Any agent's trace in the published format; each step name becomes a stage."""

    kind: Literal["agent_trace"]
    file: str
    queries: Queries | None = None
    parallel: list[str] = Field(default_factory=list)
    shared_fraction: float = Field(0.5, ge=0, le=1)

    def build(self) -> Workload:
        return agent_trace.agent_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                       self.cv, self.parallel, self.shared_fraction)


class TraceConfig(Strict):
    kind: Literal["trace"]
    file: str

    def build(self) -> Workload:
        return read_trace(self.file)


class PrebleConfig(Strict):
    """Common fields of Preble's workloads (`flowserve.workloads.preble`).

    rate: queries per second (a query is one request, except embodied-agent episodes
    and programming problems with their parallel samples); arrival `azure` is the
    Azure-like bursty process."""

    rate: float = Field(gt=0)
    queries: Queries
    seed: Seed = 0
    arrival: Literal["poisson", "gamma", "azure"] = "poisson"
    cv: float | None = CV
    max_prompt: int | None = Field(None, gt=100, le=MAX_PROMPT_TOKENS)
    active: int = Field(8, ge=1, le=MAX_QUERIES)

    @model_validator(mode="after")
    def _gamma_needs_cv(self) -> PrebleConfig:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        return self

    def _build(self, kind: str, **params: Any) -> Workload:
        return preble.build(kind, self.queries, self.rate, self.seed, self.arrival, self.cv,
                            preble.Shape(self.max_prompt, self.active), **params)


class ToolUseConfig(PrebleConfig):
    kind: Literal["tool_use"]
    tools: int = Field(100, ge=1, le=MAX_QUERIES)
    zipf: float = Field(1.1, ge=0, le=10)

    def build(self) -> Workload:
        return self._build("tool_use", tools=self.tools, zipf=self.zipf)


class EmbodiedAgentConfig(PrebleConfig):
    kind: Literal["embodied_agent"]
    task_types: int = Field(6, ge=1, le=MAX_QUERIES)

    def build(self) -> Workload:
        return self._build("embodied_agent", task_types=self.task_types)


class ProgrammingConfig(PrebleConfig):
    kind: Literal["programming"]
    samples: int = Field(8, ge=1, le=MAX_CANDIDATES)

    def build(self) -> Workload:
        return self._build("programming", samples=self.samples)


class VideoQAConfig(PrebleConfig):
    kind: Literal["video_qa"]

    def build(self) -> Workload:
        return self._build("video_qa")


class LongDocQAConfig(PrebleConfig):
    kind: Literal["long_doc_qa"]

    def build(self) -> Workload:
        return self._build("long_doc_qa")


class MixedConfig(PrebleConfig):
    """Two (or more) Preble kinds at once, the rate split evenly (Preble Fig. 8 mixes
    tool use and video QA under the Azure trace's arrivals)."""

    kind: Literal["mixed"]
    kinds: list[Literal[preble.KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["tool_use", "video_qa"], min_length=2)
    arrival: Literal["poisson", "gamma", "azure"] = "azure"

    def build(self) -> Workload:
        ids = SegmentIds()  # one id space: the parts' segments must not collide
        k = len(self.kinds)
        shape = preble.Shape(self.max_prompt, self.active)
        parts = [preble.build(kind, -(-self.queries // k), self.rate / k, self.seed + i, self.arrival,
                              self.cv, shape, ids)
                 for i, kind in enumerate(self.kinds)]
        mixed = preble.mix("mixed-" + "+".join(self.kinds), parts)
        return Workload(mixed.name, mixed.queries[: self.queries], output_priors=mixed.output_priors)


class LLMSQLConfig(Strict):
    """One SQL statement with LLM calls = one query (`flowserve.workloads.llm_sql`)."""

    kind: Literal["llm_sql"]
    table: str
    query: str
    optimize: str = "all"
    seed: Seed = 0

    def build(self) -> Workload:
        from flowserve.workloads.llm_sql import llm_sql_workload

        return llm_sql_workload(self.table, self.query, self.optimize, self.seed)


WORKLOAD_KINDS: dict[str, type[Strict]] = {
    "llm_sql": LLMSQLConfig,
    "text2sql": Text2SQLConfig,
    "chess_trace": ChessTraceConfig,
    "agent_trace": AgentTraceConfig,
    "trace": TraceConfig,
    "dag": DagConfig,
    "tool_use": ToolUseConfig,
    "embodied_agent": EmbodiedAgentConfig,
    "programming": ProgrammingConfig,
    "video_qa": VideoQAConfig,
    "long_doc_qa": LongDocQAConfig,
    "mixed": MixedConfig,
    **dict.fromkeys(("search_gen", "naive_rag", "advanced_rag"), TeolaConfig),
}

BUILTIN_WORKLOADS: dict[str, dict[str, Any]] = {
    "text2sql": {"kind": "text2sql", "trace": "mixed", "rate": 0.5, "queries": 200},
    **{f"text2sql-{t}": {"kind": "text2sql", "trace": t, "rate": 0.5, "queries": 200}
       for t in ("financial", "formula1", "mixed")},
    **{name: {"kind": "chess_trace", "file": name, "rate": 0.5}
       for name in agent_trace.BUILTIN_TRACE_FILES},
    **{kind: {"kind": kind, "rate": 2.0, "queries": 500} for kind in preble.KINDS},
    "mixed": {"kind": "mixed", "rate": 2.0, "queries": 500},
    # Teola's apps (on the built-in `teola` cluster)
    **{kind: {"kind": kind, "rate": 2.0, "queries": 200} for kind in ("search_gen", "naive_rag", "advanced_rag")},
}


def workload_config(data: Mapping[str, Any], source: str) -> Any:
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in WORKLOAD_KINDS:
        raise ConfigError(f"{source}: kind: unknown workload kind {kind!r}; "
                          f"known: {', '.join(WORKLOAD_KINDS)}")
    return validate(WORKLOAD_KINDS[kind], dict(data), source)


OUTPUT_ROOM = 256  # tokens left for the answer when prompts are sized to a context


def load_workload(ref: str, overrides: Mapping[str, Any] | None = None,
                  max_context: int | None = None) -> Workload:
    """A built-in workload name, a workload YAML, or a recorded JSONL trace.

    `max_context` (the cluster's smallest serving context) sizes the prompts of Preble's
    generators (video_qa and long_doc_qa exceed 8k-32k contexts) unless the workload sets
    `max_prompt` itself."""
    if ref.endswith(".jsonl"):
        data, source = {"kind": "trace", "file": ref}, ref
    else:
        data, source = load_mapping(ref, BUILTIN_WORKLOADS, "workload")
    if overrides:
        data = {**data, **overrides}
    config = workload_config(data, source)
    if not isinstance(config, PrebleConfig) or config.max_prompt is not None or max_context is None:
        return config.build()
    limit = max_context - OUTPUT_ROOM
    if limit <= 100:
        raise ConfigError(f"{source}: the cluster's smallest context ({max_context} tokens) leaves no room "
                          f"for {config.kind} prompts")
    wl = config.model_copy(update={"max_prompt": limit}).build()
    note = (f"{config.kind}: prompts sized to the cluster's smallest context, {max_context} tokens "
            f"(max_prompt {limit}; set workload.max_prompt to choose)")
    return replace(wl, notes=(*wl.notes, note))


__all__ = ["BUILTIN_WORKLOADS", "WORKLOAD_KINDS", "QuerySpec", "Workload", "load_workload"]
