"""`kind: dag` — a static workflow graph declared in the workload YAML.

  {kind: dag, rate: 1, queries: 100, nodes: [
     {name: plan, input: 800, output: 60, shared: 600},
     {name: search, op: web_search, duration_s: 0.4, deps: [plan]},
     {name: answer, input: 2000, output: 200, deps: [plan, search]}]}

Token lengths are drawn log-normally around the given means; the first `shared` tokens
of a node's prompt are the same for every query (its instructions).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import LLMNode
from flowserve.graph.plan import CallStep, DagNode, DagPlan, OpStep, Segment
from flowserve.graph.runtime import topological_order
from flowserve.limits import MAX_PROMPT_TOKENS, OpSeconds, OutputTokens, PromptTokens, Queries, SdLog, Seed
from flowserve.schema import Strict
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload


class DagNodeConfig(Strict):
    """One step of a `dag` workload's graph: an LLM call, or a tool op with `op`."""

    name: str = Field(min_length=1, description="the step's key, unique in the graph")
    stage: str | None = Field(None, description="stage name for statistics and the predictor (default: `name`)")
    deps: list[str] = Field(default_factory=list, description="steps that must finish first")
    input: PromptTokens = Field(0, description="mean prompt tokens of an LLM step (log-normal with `sd_log`)")
    output: OutputTokens = Field(1, description="mean output tokens (log-normal with `sd_log`)")
    shared: PromptTokens = Field(0, description="leading prompt tokens every query shares (a common prefix)")
    op: str | None = Field(None, description="a tool op's name: the step is a tool op, not an LLM call")
    duration_s: OpSeconds = Field(0.0, description="a tool op's duration")

    @model_validator(mode="after")
    def _llm_or_op(self) -> DagNodeConfig:
        if self.op is None and self.input < 2:
            raise ValueError(f"node {self.name!r}: an LLM node needs input ≥ 2 tokens (or give `op`)")
        if self.shared >= max(self.input, 1) and self.op is None:
            raise ValueError(f"node {self.name!r}: shared ({self.shared}) must be below input ({self.input})")
        return self


class DagConfig(Strict):
    """Any workflow graph given as steps and dependencies."""

    kind: Literal["dag"] = Field(description="`dag`")
    rate: float = Field(gt=0, description="queries per second")
    queries: Queries = Field(description="queries to generate")
    seed: Seed = Field(0, description="seed of arrivals and output lengths")
    arrival: Literal["poisson", "gamma"] = Field("poisson", description="arrival process")
    # gamma shape 1/cv² under/overflows outside [0.01, 100]
    cv: float | None = Field(None, ge=0.01, le=100, description="coefficient of variation of the gaps between "
                             "arrivals (gamma arrivals only)")
    workflow: str = Field("dag", description="the workflow's name in reports")
    sd_log: SdLog = Field(0.25, description="log-normal spread (σ of the log) of prompt and output lengths")
    nodes: list[DagNodeConfig] = Field(min_length=1, description="the graph's steps")

    @model_validator(mode="after")
    def _acyclic(self) -> DagConfig:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("gamma arrivals need `cv`")
        probe = [LLMNode(n.name, n.stage or n.name, (0,), 1, tuple(n.deps)) for n in self.nodes]
        try:
            topological_order(probe, set())
        except WorkflowError as e:
            raise ValueError(str(e)) from None
        return self

    def build(self) -> Workload:
        rng = np.random.default_rng(self.seed)
        times = arrival_times(rng, self.queries, self.rate, self.arrival, self.cv)
        probe = [LLMNode(n.name, "", (0,), 1, tuple(n.deps)) for n in self.nodes]
        order = [n.key for n in topological_order(probe, set())]
        by_name = {n.name: n for n in self.nodes}
        ids = SegmentIds()
        specs = []
        for i, t in enumerate(times):
            nodes = []
            for name in order:
                cfg = by_name[name]
                stage = cfg.stage or cfg.name
                if cfg.op is not None:
                    item: CallStep | OpStep = OpStep(stage, cfg.op, cfg.duration_s)
                else:
                    n_in = min(max(cfg.shared + 1, _draw(rng, cfg.input, self.sd_log)), MAX_PROMPT_TOKENS)
                    segs = [Segment(ids.shared(f"{self.workflow}/{name}"), cfg.shared)] if cfg.shared else []
                    segs.append(Segment(ids.unique(), n_in - cfg.shared))
                    item = CallStep(stage, tuple(segs), _draw(rng, cfg.output, self.sd_log))
                nodes.append(DagNode(name, item, tuple(cfg.deps)))
            specs.append(QuerySpec(i, float(t), DagPlan(self.workflow, tuple(nodes))))
        return Workload(f"dag-{self.workflow}", tuple(specs))


def _draw(rng: np.random.Generator, mean: int, sd_log: float) -> int:
    if sd_log == 0:
        return mean
    return max(1, round(float(rng.lognormal(math.log(mean) - sd_log**2 / 2, sd_log))))
