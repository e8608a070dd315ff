"""Workload config models: one pydantic model per YAML `kind:`, each with `build()` → `Workload`.

The registry of kinds and built-in names is `flowserve.workloads.registry`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from flowserve.limits import MAX_CANDIDATES, MAX_PROMPT_TOKENS, MAX_QUERIES, Candidates, Queries, Rounds, Seed
from flowserve.schema import Strict
from flowserve.workloads import agent_trace, preble, text2sql
from flowserve.workloads.base import SegmentIds, Workload
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
    rate: float | None = Field(None, gt=0)  # None: the recorded arrivals
    queries: Queries | None = None
    parallel: list[str] = Field(default_factory=list)
    shared_fraction: float = Field(0.5, ge=0, le=1)
    # remaining calls from the file's per-stage counts, or learned from the queries that
    # finish during the run (as the gateway learns them from live programs)
    priors: Literal["file", "online"] = "file"

    def build(self) -> Workload:
        return agent_trace.agent_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                       self.cv, self.parallel, self.shared_fraction, self.priors)


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
