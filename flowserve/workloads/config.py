"""Workload config models: one pydantic model per YAML `kind:`, each with `build()` → `Workload`.

The registry of kinds and built-in names is `flowserve.workloads.registry`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from flowserve.limits import MAX_CANDIDATES, MAX_PROMPT_TOKENS, MAX_QUERIES, Candidates, Queries, Rounds, Seed
from flowserve.schema import Strict
from flowserve.workloads import agent_trace, lora, preble, text2sql
from flowserve.workloads.base import SegmentIds, Workload
from flowserve.workloads.trace import read_trace

# Gamma gaps have shape 1/cv²: a cv outside [0.01, 100] under- or overflows the draw.


RATE = "queries per second"
SEED = "seed of arrivals and generated queries"
GAMMA_CV = "coefficient of variation of the gaps between arrivals (gamma arrivals only)"


class Arrivals(Strict):
    """Arrival fields every generated workload shares."""

    rate: float = Field(gt=0, description=RATE)
    seed: Seed = Field(0, description=SEED)
    arrival: Literal["poisson", "gamma"] = Field("poisson", description="arrival process")
    cv: float | None = Field(None, ge=0.01, le=100, description=GAMMA_CV)

    @model_validator(mode="after")
    def _gamma_needs_cv(self) -> Arrivals:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        return self


class Text2SQLConfig(Arrivals):
    """Synthetic CHESS-style Text-to-SQL queries, fitted to the published traces."""

    kind: Literal["text2sql"] = Field(description="`text2sql`")
    trace: Literal["financial", "formula1", "mixed"] = Field("mixed", description="the database whose trace the "
                                                             "generator follows (mixed: both)")
    queries: Queries = Field(description="queries to generate")
    candidates: Candidates = Field(2, description="SQL candidates per query")
    max_rounds: Rounds = Field(10, description="revise rounds at most per candidate")
    exec_mean_s: float = Field(0.3, gt=0, description="mean SQL execution time (log-normal)")
    error_prob: float | None = Field(None, ge=0, lt=1, description="probability a candidate's SQL fails and is "
                                     "revised (default: each database's, from the traces)")

    def build(self) -> Workload:
        params = text2sql.Text2SQLParams(self.candidates, self.max_rounds, self.exec_mean_s,
                                         self.error_prob)
        return text2sql.synthetic(self.trace, self.rate, self.queries, self.seed, self.arrival,
                                  self.cv, params)


class ChessTraceConfig(Arrivals):
    """A published CHESS trace replayed in file order (cycling when more queries are asked for)."""

    kind: Literal["chess_trace"] = Field(description="`chess_trace`")
    file: str = Field(description="a trace file, or a built-in name (chess-trace1, chess-trace2, chess-financial, "
                      "chess-formula1)")
    queries: Queries | None = Field(None, description="queries to replay (default: the trace's)")
    max_rounds: Rounds = Field(10, description="revise rounds at most per candidate")

    def build(self) -> Workload:
        params = text2sql.Text2SQLParams(max_rounds=self.max_rounds)
        return text2sql.chess_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                    self.cv, params)


class AgentTraceConfig(Arrivals):
    """Any agent's trace in the published format; each step name becomes a stage."""

    kind: Literal["agent_trace"] = Field(description="`agent_trace`")
    file: str = Field(description="a trace in the published format: a JSON list of "
                      "`{request: [{step, input_length, output_length}, ...]}`, or one such query per line (what "
                      "the gateway records: `gateway.record`)")
    rate: float | None = Field(None, gt=0, description="arrivals per second (default: the recorded arrivals)")
    queries: Queries | None = Field(None, description="queries to replay (default: the trace's)")
    parallel: list[str] = Field(default_factory=list, description="steps whose adjacent calls run at once")
    shared_fraction: float = Field(0.5, ge=0, le=1, description="share of each stage's shortest input that its "
                                   "calls share as an instruction prefix")
    priors: Literal["file", "online"] = Field("file", description="remaining calls from the file's per-stage "
                                              "counts, or learned from the queries that finish during the run "
                                              "(as the gateway learns them from live programs)")

    def build(self) -> Workload:
        return agent_trace.agent_trace(self.file, self.rate, self.queries, self.seed, self.arrival,
                                       self.cv, self.parallel, self.shared_fraction, self.priors)


class TraceConfig(Strict):
    """A recorded run (`flowserve simulate --record-trace`), replayed exactly."""

    kind: Literal["trace"] = Field(description="`trace`")
    file: str = Field(description="the JSONL trace")

    def build(self) -> Workload:
        return read_trace(self.file)


class PrebleConfig(Strict):
    """Common fields of Preble's workloads (`flowserve.workloads.preble`).

    rate: queries per second (a query is one request, except embodied-agent episodes
    and programming problems with their parallel samples); arrival `azure` is the
    Azure-like bursty process."""

    rate: float = Field(gt=0, description=RATE)
    queries: Queries = Field(description="queries to generate")
    seed: Seed = Field(0, description=SEED)
    arrival: Literal["poisson", "gamma", "azure"] = Field("poisson", description="arrival process (azure: bursts "
                                                          "at 4× the calm rate 20% of the time)")
    cv: float | None = Field(None, ge=0.01, le=100, description=GAMMA_CV)
    max_prompt: int | None = Field(None, gt=100, le=MAX_PROMPT_TOKENS, description="longest prompt in tokens: "
                                   "long unique prefixes are cut to fit (default: the cluster's smallest context "
                                   "less 256)")
    active: int = Field(8, ge=1, le=MAX_QUERIES, description="open videos or documents that questions are drawn "
                        "from")

    @model_validator(mode="after")
    def _gamma_needs_cv(self) -> PrebleConfig:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        return self

    def _build(self, kind: str, **params: Any) -> Workload:
        return preble.build(kind, self.queries, self.rate, self.seed, self.arrival, self.cv,
                            preble.Shape(self.max_prompt, self.active), **params)


class ToolUseConfig(PrebleConfig):
    """Tool use: system prompt → tool instructions → question."""

    kind: Literal["tool_use"] = Field(description="`tool_use`")
    tools: int = Field(100, ge=1, le=MAX_QUERIES, description="distinct tools (instruction prefixes)")
    zipf: float = Field(1.1, ge=0, le=10, description="Zipf exponent of the tools' popularity")

    def build(self) -> Workload:
        return self._build("tool_use", tools=self.tools, zipf=self.zipf)


class EmbodiedAgentConfig(PrebleConfig):
    """Embodied agent: per-task-type demonstrations → task → chained steps; an episode is one query."""

    kind: Literal["embodied_agent"] = Field(description="`embodied_agent`")
    task_types: int = Field(6, ge=1, le=MAX_QUERIES, description="distinct task types (demonstration prefixes)")

    def build(self) -> Workload:
        return self._build("embodied_agent", task_types=self.task_types)


class ProgrammingConfig(PrebleConfig):
    """Programming: shared examples → problem, several samples per problem."""

    kind: Literal["programming"] = Field(description="`programming`")
    samples: int = Field(8, ge=1, le=MAX_CANDIDATES, description="parallel samples per problem")

    def build(self) -> Workload:
        return self._build("programming", samples=self.samples)


class VideoQAConfig(PrebleConfig):
    """Questions about long videos (long unique prefixes)."""

    kind: Literal["video_qa"] = Field(description="`video_qa`")

    def build(self) -> Workload:
        return self._build("video_qa")


class LongDocQAConfig(PrebleConfig):
    """Questions about long documents (long unique prefixes)."""

    kind: Literal["long_doc_qa"] = Field(description="`long_doc_qa`")

    def build(self) -> Workload:
        return self._build("long_doc_qa")


class MixedConfig(PrebleConfig):
    """Two (or more) Preble kinds at once, the rate split evenly (Preble Fig. 8 mixes
    tool use and video QA under the Azure trace's arrivals)."""

    kind: Literal["mixed"] = Field(description="`mixed`")
    kinds: list[Literal[preble.KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["tool_use", "video_qa"], min_length=2, description="the Preble kinds to mix")
    arrival: Literal["poisson", "gamma", "azure"] = Field("azure", description="arrival process")

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

    kind: Literal["llm_sql"] = Field(description="`llm_sql`")
    table: str = Field(description="a CSV or Parquet file; its stem is the table's name")
    query: str = Field(description="the SQL statement, with LLM() calls")
    optimize: str = Field("all", description="the planner's optimisations: none, all, or a list (dedup, reorder, "
                          "ggr, sort, predicates, warmup)")
    seed: Seed = Field(0, description="seed of the simulated answers")

    def build(self) -> Workload:
        from flowserve.workloads.llm_sql import llm_sql_workload

        return llm_sql_workload(self.table, self.query, self.optimize, self.seed)


class LoraConfig(Arrivals):
    """Requests to many LoRA adapters of one base model, Zipf popularity (`flowserve.workloads.lora`)."""

    kind: Literal["lora"] = Field(description="`lora`")
    queries: Queries = Field(description="queries to generate (one call each)")
    adapters: int = Field(32, ge=1, le=4096, description="distinct adapters, named PREFIX0, PREFIX1, …")
    zipf: float = Field(1.0, ge=0, le=10, description="Zipf exponent of the adapters' popularity (0: uniform)")
    prefix: str = Field("lora-", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._/-]+$",
                        description="adapter names: the prefix and the adapter's index")
    base_share: float = Field(0.0, ge=0, le=1, description="share of the queries that name the base model, no adapter")
    system_tokens: int = Field(100, ge=16, le=MAX_PROMPT_TOKENS // 2, description="mean system prompt of an adapter's "
                               "application (shared by its requests)")
    question_tokens: int = Field(200, ge=8, le=MAX_PROMPT_TOKENS // 2, description="mean question of a request")
    output_tokens: int = Field(120, ge=4, le=32_768, description="mean output tokens")

    def build(self) -> Workload:
        return lora.lora_workload(self.queries, self.rate, self.seed, self.adapters, self.zipf, self.prefix,
                                  self.base_share, self.system_tokens, self.question_tokens, self.output_tokens,
                                  self.arrival, self.cv)
