"""`{kind: app, app: "package.module:Class", inputs: FILE.jsonl, rate, queries, seed}`:
a user's own `Workflow` class simulated as written (`flowserve.apps.user`), one query per
line of `inputs` (a JSON object: the class's keyword arguments beyond `args`), cycled
when `queries` exceeds them, at the configured arrivals (Poisson by default).

What only a live run knows is modelled: each stage's output length comes from `outputs`
(tokens per stage), else from a recorded trace of the app (`trace`: what
`gateway.record` wrote, per-stage means), else the predictor's default; each op takes
`tools[key]` seconds, by the step's key (0 when not given). Prompts are the workflow's
own text.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from flowserve.errors import ConfigError, RequestError
from flowserve.graph.oracle import NO_ORACLE, TableOracle, ToolOutcome
from flowserve.graph.workflow import Workflow
from flowserve.limits import Queries
from flowserve.schema import read_text
from flowserve.workflows import check_arguments, construct, workflow_class
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import AppQuery, QuerySpec, Workload
from flowserve.workloads.config import Arrivals


def read_inputs(path: str) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(read_text(path, "inputs file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{n}: not JSON ({e.msg}); one JSON object of inputs per line") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{n}: expected a JSON object of the workflow's inputs")
        rows.append(row)
    if not rows:
        raise ConfigError(f"{path}: no inputs")
    return rows


def stage_outputs(trace: str) -> dict[str, float]:
    """Mean output tokens per stage of a recorded trace."""
    outs: dict[str, list[int]] = defaultdict(list)
    for q in read_agent_trace(trace).traced:
        for c in q.calls:
            outs[c.step].append(c.output_length)
    return {s: float(np.mean(v)) for s, v in outs.items()}


class AppConfig(Arrivals):
    """A user's Workflow class (import path or `flowserve.workflows` entry point), simulated."""

    kind: Literal["app"] = Field(description="`app`")
    app: str = Field(description="the Workflow class: `package.module:Class`, or a name an installed package "
                     "registers in the `flowserve.workflows` entry-point group")
    inputs: str = Field(description="a JSON Lines file: one JSON object of the class's inputs per query")
    queries: Queries | None = Field(None, description="queries (default: one per input; cycled when more)")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of every query's object")
    name: str | None = Field(None, description="the workflow's name in reports and priors (default: the class's)")
    outputs: dict[str, int] = Field(default_factory=dict, description="output tokens per stage")
    trace: str | None = Field(None, description="a recorded trace of the app (`gateway.record`): per-stage mean "
                              "output tokens")
    tools: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict, description="seconds each tool "
                                                            "step takes, by the step's key (default 0)")

    def build(self) -> Workload:
        cls = workflow_class(self.app)
        check_arguments(cls, self.args, "workload.args")
        inputs = read_inputs(self.inputs)
        name = self.name or (cls.name if cls.name != Workflow.name else cls.__name__)
        for i, row in enumerate(inputs):  # every input builds, before anything runs
            try:
                construct(cls, self.args, row)
            except RequestError as e:
                raise ConfigError(f"{self.inputs}: input {i + 1}: {e}") from None
        n = len(inputs) if self.queries is None else self.queries
        times = arrival_times(np.random.default_rng(self.seed), n, self.rate, self.arrival, self.cv)
        priors = stage_outputs(self.trace) if self.trace else {}
        priors.update({s: float(v) for s, v in self.outputs.items()})
        oracle = TableOracle(tools={k: ToolOutcome(v) for k, v in self.tools.items()}) if self.tools else NO_ORACLE
        args = dict(self.args)

        def make(row: dict[str, Any]) -> Any:
            return lambda: construct(cls, args, row)

        specs = tuple(QuerySpec(i, float(t), AppQuery(name, make(inputs[i % len(inputs)]), oracle))
                      for i, t in enumerate(times))
        return Workload(f"app:{name}", specs, output_priors={(name, s): v for s, v in priors.items()})
