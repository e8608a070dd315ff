"""Replaying a flowserve workload through the live driver (validate, benchmarks).

Each query runs its plan with the same `PlanWorkflow` the simulator uses, with the
plan's oracle: LLM calls ask the engine for exactly the recorded output length
(`ignore_eos`), tool steps take their recorded duration. The driver turns the plan's
segments into real token ids with its `TokenMaterializer` (the sharing structure the
simulator sees, in real tokens). Queries are submitted at their arrival times on the
driver's clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flowserve.graph.replay import PlanWorkflow, plan_oracle
from flowserve.host.driver import LiveDriver
from flowserve.host.query import QueryResult, Rejected
from flowserve.types.work import WorkflowRef
from flowserve.workloads.base import Workload


@dataclass(frozen=True)
class ReplayOutcome:
    query_id: int  # the workload's id
    result: QueryResult | None
    rejected: str | None = None

    @property
    def latency_s(self) -> float | None:
        return None if self.result is None or not self.result.completed else self.result.latency_s


async def replay_live(driver: LiveDriver, workload: Workload, model: str | None = None) -> list[ReplayOutcome]:
    """Submit every query at its arrival time (seconds after the call) and wait for all.
    The driver needs a `TokenMaterializer` (`compose_driver(..., segments=...)`) for real engines."""
    t0 = time.monotonic()

    async def one(spec: Any) -> ReplayOutcome:
        delay = t0 + spec.arrival - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the workload's own arrival process, not synchronisation
        plan = spec.plan
        ref = WorkflowRef(PlanWorkflow.name, (plan, workload.expectations.get(plan.workflow), model))
        h = driver.new_query(plan.workflow, ref, model, spec.tenant, spec.priority, oracle=plan_oracle(plan))
        try:
            await driver.submit(h)
        except Rejected as e:
            return ReplayOutcome(spec.id, None, e.reason)
        return ReplayOutcome(spec.id, await h.done)

    return list(await asyncio.gather(*(one(q) for q in workload.queries)))


def hit_rate(outcomes: Sequence[ReplayOutcome]) -> float:
    """Prompt tokens the engines reported cached / all prompt tokens (SPEC §3.4)."""
    prompt = cached = 0
    for o in outcomes:
        if o.result is not None:
            for c in o.result.calls:
                prompt += c.prompt_tokens
                cached += c.cached_tokens
    return cached / prompt if prompt else 0.0
