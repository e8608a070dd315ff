"""Replay of any agent's trace in the published format, whatever its step names.

The format (`data/README.md`): a JSON list, one element per query, each a mapping with
one list of LLM calls `{"step", "input_length", "output_length"}` in execution order
(CHESS names it `Text2SQLRequest`; any key is accepted) — or the same mappings one per
line (JSON Lines), as the gateway records them. Each step name becomes a stage;
adjacent calls of a step named in `parallel` run at once, the rest one after another.
What the trace does not record is assumed, and said so: each stage's calls share an
instruction prefix of `shared_fraction` of the stage's shortest input across the file
(agents reuse one prompt template per step), the rest is per query.

A recorded query keeps its shape (`flowserve.workloads.program_trace`: threads, the
calls each call followed, the client's tool gaps, prompts as segments) and replays as a
graph with its gaps as timed ops, at its recorded arrival unless a `rate` is given.
Remaining calls are predicted from the file's per-stage counts (`priors: file`), or
learned from the queries that finish during the run, as the gateway learns them from
live programs (`priors: online`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from flowserve.errors import ConfigError
from flowserve.graph.nodes import CallEstimate
from flowserve.graph.plan import CallStep, QueryPlan, Segment, Step
from flowserve.profiles.stage_priors import mean_residual
from flowserve.schema import read_text
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.program_trace import TracedQuery, parse_query, shaped_plan

Call = tuple[str, int, int]  # (step name, input tokens, output tokens)

# Traces shipped inside the package, by name.
BUILTIN_TRACE_FILES = {
    "chess-financial": "chess-financial.json", "chess-formula1": "chess-formula1.json",
    "chess-trace1": "chess-trace1.json", "chess-trace2": "chess-trace2.json",
}


@dataclass(frozen=True)
class AgentTrace:
    name: str
    traced: tuple[TracedQuery, ...]

    @property
    def queries(self) -> tuple[tuple[Call, ...], ...]:
        return tuple(tuple((c.step, c.input_length, c.output_length) for c in q.calls) for q in self.traced)

    def steps(self) -> list[str]:
        """Step names in order of first appearance."""
        return list(dict.fromkeys(s for q in self.queries for s, _, _ in q))


def _text(file: str) -> str:
    if file in BUILTIN_TRACE_FILES:
        return (resources.files("flowserve") / "data" / "text2sql" / BUILTIN_TRACE_FILES[file]).read_text()
    return read_text(file, "trace file")


def read_agent_trace(file: str) -> AgentTrace:
    """Parse a trace file (or a built-in trace name); a clear ConfigError on anything else."""
    try:
        queries = tuple(parse_query(item, where) for where, item in trace_records(_text(file)))
    except RecursionError:
        raise ConfigError(f"trace {file!r} nests JSON too deeply") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConfigError(f"trace {file!r} is not an agent trace (a JSON list of queries, or one query per "
                          f"line, each {{Request: [{{step, input_length, output_length}}, ...]}}): {e}") from None
    if not queries:
        raise ConfigError(f"trace {file!r} holds no queries")
    return AgentTrace(Path(file).stem, queries)


def trace_records(text: str) -> list[tuple[str, Any]]:
    """(where, query) of a JSON list, or of JSON Lines (one query per line)."""
    if text.lstrip().startswith("["):
        return [(f"query {i}", item) for i, item in enumerate(json.loads(text))]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise ValueError(f"line {n} is not JSON ({e.msg}); is the file truncated?") from None
    return out


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


def agent_trace(file: str, rate: float | None, queries: int | None, seed: int, arrival: str = "poisson",
                cv: float | None = None, parallel: Sequence[str] = (),
                shared_fraction: float = 0.5, priors: Literal["file", "online"] = "file") -> Workload:
    """Replay `file`'s queries (cycled when `queries` exceeds them) at `rate` arrivals, or
    at their recorded arrivals (`rate` None)."""
    trace = read_agent_trace(file)
    unknown = sorted(set(parallel) - set(trace.steps()))
    if unknown:
        raise ConfigError(f"parallel names steps the trace {file!r} does not have: {', '.join(unknown)} "
                          f"(its steps: {', '.join(trace.steps())})")
    n = len(trace.traced) if queries is None else queries
    if rate is None:
        if any(q.arrival is None for q in trace.traced) or n > len(trace.traced):
            raise ConfigError(f"trace {file!r}: give a `rate` (its queries have no recorded arrivals, or "
                              f"{n} queries are more than the {len(trace.traced)} recorded)")
        # a recording lists queries as they ended: replay them in arrival order
        trace = AgentTrace(trace.name, tuple(sorted(trace.traced[:n], key=lambda q: q.arrival or 0.0)))
        start = trace.traced[0].arrival or 0.0
        times = [(q.arrival or 0.0) - start for q in trace.traced]
    else:
        times = list(arrival_times(np.random.default_rng(seed), n, rate, arrival, cv))
    default = f"agent:{trace.name}"
    shared = shared_prefixes(trace, shared_fraction)
    ids, par = SegmentIds(), frozenset(parallel)
    specs, calls = [], trace.queries
    for i, t in enumerate(times):
        q = trace.traced[i % len(trace.traced)]
        wf = q.workflow or default
        plan = (shaped_plan(q, wf, shared, ids) if q.shaped
                else agent_plan(calls[i % len(calls)], wf, par, shared, ids))
        specs.append(QuerySpec(i, float(t), plan))
    workflows = sorted({q.plan.workflow for q in specs})
    if priors == "online":  # as the gateway learns them: from the queries that finish
        return Workload(f"agent-trace:{trace.name}", tuple(specs), learned=frozenset(workflows))
    expectations, outputs = {}, {}
    for wf in workflows:
        part = AgentTrace(trace.name, tuple(q for q in trace.traced if (q.workflow or default) == wf))
        expectations[wf] = stage_counts(part)
        outputs.update({(wf, s): o for s, o in output_means(part).items()})
    return Workload(f"agent-trace:{trace.name}", tuple(specs), expectations, outputs)
