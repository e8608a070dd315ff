"""Replay of any agent's trace in the published format, whatever its step names.

The format (`../shared/data/README.md`): a JSON list, one element per query, each a
mapping with one list of LLM calls `{"step", "input_length", "output_length"}` in
execution order (CHESS names it `Text2SQLRequest`; any key is accepted). Each step name
becomes a stage; adjacent calls of a step named in `parallel` run at once, the rest one
after another. What the trace does not record is assumed, and said so: each stage's
calls share an instruction prefix of `shared_fraction` of the stage's shortest input
across the file (agents reuse one prompt template per step), the rest is per query.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.nodes import CallEstimate
from flowserve.graph.plan import CallStep, QueryPlan, Segment, Step
from flowserve.profiles.stage_priors import mean_residual
from flowserve.schema import read_text
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

Call = tuple[str, int, int]  # (step name, input tokens, output tokens)

# Traces shipped inside the package, by name.
BUILTIN_TRACE_FILES = {
    "chess-financial": "chess-financial.json", "chess-formula1": "chess-formula1.json",
    "chess-trace1": "chess-trace1.json", "chess-trace2": "chess-trace2.json",
}


@dataclass(frozen=True)
class AgentTrace:
    name: str
    queries: tuple[tuple[Call, ...], ...]

    def steps(self) -> list[str]:
        """Step names in order of first appearance."""
        return list(dict.fromkeys(s for q in self.queries for s, _, _ in q))


def _text(file: str) -> str:
    if file in BUILTIN_TRACE_FILES:
        return (resources.files("flowserve") / "data" / "text2sql" / BUILTIN_TRACE_FILES[file]).read_text()
    return read_text(file, "trace file")


def _length(s: Mapping[str, object], field: str) -> int:
    v = s[field]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{field} must be a non-negative integer, got {v!r}")
    return v


def read_agent_trace(file: str) -> AgentTrace:
    """Parse a trace file (or a built-in trace name); a clear ConfigError on anything else."""
    try:
        data = json.loads(_text(file))
        if not isinstance(data, list):
            raise ValueError("the top level must be a list of queries")
        queries = []
        for i, item in enumerate(data):
            lists = [v for v in item.values() if isinstance(v, list)] if isinstance(item, dict) else []
            if len(lists) != 1:
                raise ValueError(f"query {i} must be a mapping holding one list of calls")
            calls = tuple((str(s["step"]), _length(s, "input_length"), _length(s, "output_length"))
                          for s in lists[0])
            if not calls:
                raise ValueError(f"query {i} has no calls")
            queries.append(calls)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"trace {file!r} is not an agent trace "
                          f"(a list of {{Request: [{{step, input_length, output_length}}, ...]}}): {e}") from None
    if not queries:
        raise ConfigError(f"trace {file!r} holds no queries")
    return AgentTrace(Path(file).stem, tuple(queries))


def group_steps(calls: Sequence[Call], parallel: frozenset[str]) -> list[list[Call]]:
    """Adjacent calls of one parallel step form one group; every other call is alone."""
    groups: list[list[Call]] = []
    for c in calls:
        if groups and c[0] in parallel and groups[-1][-1][0] == c[0]:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


@dataclass(frozen=True)
class StageCounts:
    """Expected remaining calls from the trace's own per-stage counts: for a stage that
    issued k calls so far, E[N − k | N ≥ k] over the trace's queries (0 if none went on)."""

    counts: Mapping[str, tuple[int, ...]]
    input_mean: Mapping[str, float]

    def __call__(self, issued: Mapping[str, int], attrs: Mapping[str, object]) -> list[CallEstimate]:
        out = []
        for stage, counts in self.counts.items():
            left = mean_residual(counts, issued.get(stage, 0))
            if left > 1e-9:
                out.append(CallEstimate(stage, round(self.input_mean[stage]), None, left))
        return out


def stage_counts(trace: AgentTrace) -> StageCounts:
    steps = trace.steps()
    counts = {s: tuple(sum(1 for c in q if c[0] == s) for q in trace.queries) for s in steps}
    inputs: dict[str, list[int]] = defaultdict(list)
    for q in trace.queries:
        for s, n_in, _ in q:
            inputs[s].append(n_in)
    return StageCounts(counts, {s: float(np.mean(v)) for s, v in inputs.items()})


def output_means(trace: AgentTrace) -> dict[str, float]:
    outs: dict[str, list[int]] = defaultdict(list)
    for q in trace.queries:
        for s, _, n_out in q:
            outs[s].append(n_out)
    return {s: float(np.mean(v)) for s, v in outs.items()}


def shared_prefixes(trace: AgentTrace, fraction: float) -> dict[str, int]:
    shortest: dict[str, int] = {}
    for q in trace.queries:
        for s, n_in, _ in q:
            shortest[s] = min(shortest.get(s, n_in), n_in)
    return {s: int(n * fraction) for s, n in shortest.items()}


def agent_plan(calls: Sequence[Call], workflow: str, parallel: frozenset[str],
               shared: Mapping[str, int], ids: SegmentIds) -> QueryPlan:
    steps: list[Step] = []
    for group in group_steps(calls, parallel):
        items = []
        for stage, n_in, n_out in group:
            n_in = max(n_in, 1)
            head = min(shared[stage], n_in - 1)
            prompt = ((Segment(ids.shared(f"{workflow}/{stage}"), head),) if head > 0 else ()) + (
                Segment(ids.unique(), n_in - head),)
            items.append(CallStep(stage, prompt, max(n_out, 1)))
        steps.append(tuple(items))
    return QueryPlan(workflow, tuple(steps))


def agent_trace(file: str, rate: float, queries: int | None, seed: int, arrival: str = "poisson",
                cv: float | None = None, parallel: Sequence[str] = (),
                shared_fraction: float = 0.5) -> Workload:
    """Replay `file`'s queries (cycled when `queries` exceeds them) at `rate` arrivals."""
    trace = read_agent_trace(file)
    unknown = sorted(set(parallel) - set(trace.steps()))
    if unknown:
        raise ConfigError(f"parallel names steps the trace {file!r} does not have: {', '.join(unknown)} "
                          f"(its steps: {', '.join(trace.steps())})")
    n = len(trace.queries) if queries is None else queries
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, n, rate, arrival, cv)
    workflow = f"agent:{trace.name}"
    shared = shared_prefixes(trace, shared_fraction)
    ids, par = SegmentIds(), frozenset(parallel)
    specs = tuple(QuerySpec(i, float(t), agent_plan(trace.queries[i % len(trace.queries)], workflow,
                                                    par, shared, ids))
                  for i, t in enumerate(times))
    priors = {(workflow, s): o for s, o in output_means(trace).items()}
    return Workload(f"agent-trace:{trace.name}", specs, {workflow: stage_counts(trace)}, priors)
