"""The workload of `flowserve bench replicas`, one seeded set of queries for both sides:
the simulator replays it as a `Workload`, the live client sends it as requests.

* tool use (Preble's ToolBench shape, `flowserve.workloads.preble.tool_use`): one call
  per query, a system prompt, one of 100 tools' instructions (Zipf popularity) and a
  question — the long tail of tools is where replicas that do not share what they routed
  lose their cache hits;
* programs: agents of `program_calls` calls, one after the other, every call the agent's
  demonstrations plus its growing history (each call adds an action and an observation);
* two tenants, `gold` (weight 2) and `free` (weight 1), taking turns.

Times are simulated seconds; the live client runs them `time_scale` times faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload
from flowserve.workloads.preble import Shape as PrebleShape
from flowserve.workloads.preble import lognormal, tool_use

TENANTS = ("gold", "free")
WEIGHTS = {"gold": 2.0, "free": 1.0}
TOOL, PROGRAM = "tool_use", "program"


@dataclass(frozen=True)
class ReplicasShape:
    tools: int = 100
    program_share: float = 0.25  # of the queries
    program_calls: int = 4
    agent_kinds: int = 6
    agent_tokens: int = 1700  # demonstrations per kind of agent (ALFWorld-like)
    step_tokens: int = 60  # an action and its observation
    program_output: int = 16


def replicas_workload(queries: int, rate: float, seed: int = 0, shape: ReplicasShape = ReplicasShape(),
                      tenants: tuple[str, ...] = TENANTS) -> Workload:
    """`queries` arriving at `rate` per simulated second (Poisson)."""
    rng = np.random.default_rng(seed)
    times = arrival_times(rng, queries, rate)
    ids = SegmentIds()
    programs = rng.random(queries) < shape.program_share
    tools = iter(tool_use(rng, ids, PrebleShape(), int((~programs).sum()), tools=shape.tools))
    demos = [Segment(ids.shared(f"agent/{k}"), shape.agent_tokens) for k in range(shape.agent_kinds)]
    specs = []
    for i, t in enumerate(times):
        if programs[i]:
            history: tuple[Segment, ...] = (demos[int(rng.integers(shape.agent_kinds))],
                                            Segment(ids.unique(), lognormal(rng, 60, 20, low=10)))
            steps = []
            for k in range(shape.program_calls):
                steps.append((CallStep(f"step{k}", history, shape.program_output),))
                history = (*history, Segment(ids.unique(), shape.program_output + shape.step_tokens))
            plan = QueryPlan(PROGRAM, tuple(steps))
        else:
            plan = next(tools)
        specs.append(QuerySpec(i, float(t), plan, tenants[i % len(tenants)]))
    priors = {(TOOL, "tool_call"): 43.0,
              **{(PROGRAM, f"step{k}"): float(shape.program_output) for k in range(shape.program_calls)}}
    return Workload("replicas", tuple(specs), {}, priors)
