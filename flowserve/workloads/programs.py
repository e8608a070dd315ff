"""Agentic programs like Autellix's workloads (Luo et al., 2025, §6): each program is a
client-side loop of LLM calls with tool waits in between, many short and a few very
long, some fanning out into threads that join again.

* calls per program: lognormal (median `calls_median`, log-sd `calls_sigma`), capped at
  `max_calls` — heavy-tailed, as ReAct and SWE-agent traces are;
* a program's context grows: its app's system prompt (shared by every program of that
  app), the user's request, then each call's answer and the tool result that follows;
* between calls the client runs a tool: exponential waits of mean `tool_s`;
* with probability `thread_prob` a program forks 2..`max_threads` threads after its
  first call (map-reduce, tree search), each a short chain that continues from the
  shared context, then joins them in one more call.

Programs come out as traced queries (`flowserve.workloads.program_trace`): the
simulator replays them as graphs, a live benchmark sends them through the gateway as
program calls, and what the gateway records of them reads back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from flowserve.graph.plan import Segment
from flowserve.graph.program import MAIN_THREAD, PROGRAM_WORKFLOW
from flowserve.limits import Queries, Seed
from flowserve.schema import Strict
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.program_trace import TracedCall, TracedQuery, shaped_plan


@dataclass(frozen=True)
class ProgramShape:
    apps: int = 4
    system_tokens: int = 600
    user_tokens: float = 200.0
    tool_result_tokens: float = 120.0
    output_tokens: float = 100.0
    calls_median: float = 3.0
    calls_sigma: float = 1.0
    max_calls: int = 40
    tool_s: float = 1.0
    thread_prob: float = 0.25
    max_threads: int = 4


# prefill-heavy agent calls: long tool results, short answers (ReAct/SWE-agent-like); `bench programs`
# and `bench compare` run these programs with deadlines of PROGRAM_SLO_SCALE × their time alone
AGENT_SHAPE = ProgramShape(system_tokens=2000, user_tokens=500, tool_result_tokens=2000, output_tokens=80,
                           calls_median=4.0, tool_s=1.0)
PROGRAM_SLO_SCALE = 5.0


class _Builder:
    """One program's calls as they are generated: contexts per thread, as segments."""

    def __init__(self, rng: np.random.Generator, shape: ProgramShape, ids: SegmentIds) -> None:
        self.rng, self.shape, self.ids = rng, shape, ids
        self.calls: list[TracedCall] = []

    def length(self, mean: float) -> int:
        return max(1, int(self.rng.lognormal(np.log(mean) - 0.18, 0.6)))  # mean ≈ `mean`

    def gap(self) -> float:
        return float(self.rng.exponential(self.shape.tool_s))

    def call(self, stage: str, thread: str, context: list[Segment], after: tuple[int, ...],
             gap: float) -> int:
        prompt = tuple(context)
        out = min(self.length(self.shape.output_tokens), 1024)
        self.calls.append(TracedCall(stage, sum(s.length for s in prompt), out, thread, after, gap, prompt))
        # the answer and the tool's result extend the context the next call sees
        context.append(Segment(self.ids.unique(), out))
        context.append(Segment(self.ids.unique(), self.length(self.shape.tool_result_tokens)))
        return len(self.calls) - 1


def program(rng: np.random.Generator, shape: ProgramShape, ids: SegmentIds) -> tuple[TracedCall, ...]:
    b = _Builder(rng, shape, ids)
    app = int(rng.integers(shape.apps))
    context = [Segment(ids.shared(f"app{app}"), shape.system_tokens), Segment(ids.unique(),
                                                                               b.length(shape.user_tokens))]
    n = min(shape.max_calls, max(1, round(float(rng.lognormal(np.log(shape.calls_median), shape.calls_sigma)))))
    last = b.call("plan", MAIN_THREAD, context, (), 0.0)
    if n >= 4 and rng.random() < shape.thread_prob:
        ends = []
        for t in range(int(rng.integers(2, shape.max_threads + 1))):
            ctx, prev = list(context), last
            for _ in range(int(rng.integers(1, 3))):
                prev = b.call("work", f"t{t}", ctx, (prev,), b.gap())
            ends.append(prev)
        last = b.call("join", MAIN_THREAD, context, tuple(ends), b.gap())
    while len(b.calls) < n:
        last = b.call("act", MAIN_THREAD, context, (last,), b.gap())
    return tuple(b.calls)


def program_traces(queries: int, rate: float, seed: int, shape: ProgramShape = ProgramShape()) -> list[TracedQuery]:
    """`queries` programs arriving at `rate` per second (Poisson)."""
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, queries, rate)
    ids = SegmentIds()
    return [TracedQuery(program(rng, shape, ids), float(t), PROGRAM_WORKFLOW) for t in times]


def traced_workload(name: str, traced: list[TracedQuery]) -> Workload:
    """Traced programs as a workload whose remaining calls the core learns online, as the
    gateway does live (no priors from the generator)."""
    ids = SegmentIds()
    specs = tuple(QuerySpec(i, q.arrival or 0.0, shaped_plan(q, q.workflow or PROGRAM_WORKFLOW, {}, ids))
                  for i, q in enumerate(traced))
    return Workload(name, specs, learned=frozenset({PROGRAM_WORKFLOW}))


class ProgramsConfig(Strict):
    """Autellix-like agentic programs (`flowserve.workloads.programs`)."""

    kind: Literal["programs"] = Field(description="`programs`")
    rate: float = Field(gt=0, description="programs arriving per second (Poisson)")
    queries: Queries = Field(description="programs to generate")
    seed: Seed = Field(0, description="seed of the generator")
    calls_median: float = Field(3.0, gt=0, le=1000, description="median calls per program (lognormal, log-sd 1)")
    max_calls: int = Field(40, ge=1, le=10_000, description="the most calls a program makes")
    tool_s: float = Field(1.0, ge=0, le=3600, description="mean seconds of tool work between a program's calls")
    thread_prob: float = Field(0.25, ge=0, le=1, description="share of programs that fan out into parallel threads")

    def build(self) -> Workload:
        shape = ProgramShape(calls_median=self.calls_median, max_calls=self.max_calls, tool_s=self.tool_s,
                             thread_prob=self.thread_prob)
        return traced_workload("programs", program_traces(self.queries, self.rate, self.seed, shape))
