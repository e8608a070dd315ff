"""Replaying a flowserve workload through the live driver (validate, benchmarks).

A workload's prompts are segment lists (`flowserve.graph.plan`); `TokenMaterializer` turns
them into token ids a real engine accepts: segment s is a pseudo-random run of ids from
the model's vocabulary seeded by (salt, s), so equal segments are equal tokens, a shorter
segment of the same id is a prefix of the longer one, and different segments differ from
their first tokens on — the sharing structure the simulator sees, in real tokens. Each
query runs its `QueryPlan` with the same `StagedProgram` the simulator uses; LLM calls
ask for exactly the recorded output length (`ignore_eos`), tool steps take their recorded
duration. Queries are submitted at their arrival times on the driver's clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowserve.engines.backend import CallPayload
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.query import QueryResult, Rejected
from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult
from flowserve.graph.plan import Segment
from flowserve.graph.program import StagedProgram
from flowserve.types import Tokens
from flowserve.workloads.base import Workload

RESERVED_IDS = 16  # keep clear of BOS/EOS and other special tokens at the low end


class TokenMaterializer:
    """Segment lists → valid token ids (see the module docstring)."""

    def __init__(self, vocab_size: int, salt: int = 0) -> None:
        assert vocab_size > 2 * RESERVED_IDS
        self.vocab = vocab_size
        self.salt = salt
        self._cache: dict[int, np.ndarray] = {}

    def segment(self, seg: Segment) -> Tokens:
        run = self._cache.get(seg.id)
        if run is None or len(run) < seg.length:
            rng = np.random.default_rng([self.salt, seg.id])
            run = rng.integers(RESERVED_IDS, self.vocab - RESERVED_IDS, size=max(seg.length, 64))
            self._cache[seg.id] = run
        return tuple(int(t) for t in run[: seg.length])

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out: Tokens = ()
        for seg in segments:
            out += self.segment(seg)
        return out


class ReplayProgram:
    """The simulator's `StagedProgram` with exact output lengths requested from the engine."""

    def __init__(self, staged: StagedProgram) -> None:
        self._staged = staged

    def _exact(self, nodes: Sequence[Node]) -> list[Node]:
        return [dataclasses.replace(n, payload=CallPayload(ignore_eos=True)) if isinstance(n, LLMNode) else n
                for n in nodes]

    def start(self) -> Sequence[Node]:
        return self._exact(self._staged.start())

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        return self._exact(self._staged.on_done(node, result))

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return self._staged.expected_remaining()

    def output(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class ReplayOutcome:
    query_id: int  # the workload's id
    result: QueryResult | None
    rejected: str | None = None

    @property
    def latency_s(self) -> float | None:
        return None if self.result is None or self.result.status != "completed" else self.result.latency_s


async def replay_live(driver: LiveDriver, workload: Workload, vocab_size: int, salt: int = 0,
                      model: str | None = None) -> list[ReplayOutcome]:
    """Submit every query at its arrival time (seconds after the call) and wait for all."""
    mat = TokenMaterializer(vocab_size, salt)
    t0 = time.monotonic()

    async def one(spec: Any) -> ReplayOutcome:
        delay = t0 + spec.arrival - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the workload's own arrival process, not synchronisation
        plan = spec.plan
        program = ReplayProgram(StagedProgram(plan, mat, workload.expectations.get(plan.workflow), model))
        h = driver.new_query(plan.workflow, program, model, spec.tenant, spec.priority)  # type: ignore[arg-type]
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
