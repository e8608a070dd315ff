"""Statements on a simulated cluster: the calls run through the simulator driver.

Answers are modelled (`modelled.py`, deterministic in the prompt) so the statement's
relational work goes on at once; each batch is recorded as one step of the statement's
plan — its calls' prompts as segments that keep the fields' sharing structure (equal
field text ⇒ equal segment), outputs as the modelled lengths. `report()` simulates the
plan as ONE query on the cluster (one statement = one query; each LLM operator waits for
the previous one, its calls in the planner's send order through the late-binding pool):
latency_s is the statement's virtual end-to-end time. A plan of more than FLUSH_CALLS calls
is simulated in parts one after the other (the parts' times add up), so 10⁶ rows never
hold one plan of 10⁶ calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from flowserve.graph.plan import CallStep, DagNode, DagPlan, OpStep, Segment
from flowserve.profiles.instance import max_context
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sql.backend import Answer, Progress
from flowserve.sql.estimate import token_hit_rate
from flowserve.sql.modelled import modelled_answer
from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import Request
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import QueryClass
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

FLUSH_CALLS = 50_000  # a statement's plan is simulated in parts of this many calls: memory stays bounded


class SimClusterBackend:
    def __init__(self, cluster: Sequence[InstanceSpec], policy: PolicySpec | None = None, seed: int = 0,
                 prefix_caching: bool = True, query_class: QueryClass = "batch",
                 flush: bool = True) -> None:
        if not prefix_caching:
            cluster = [dataclasses.replace(s, engine=dataclasses.replace(s.engine, prefix_caching=False))
                       for s in cluster]
        self.cluster = tuple(cluster)
        self.model = self.cluster[0].model if self.cluster else None
        self.policy = policy or PolicySpec("round_robin", "fcfs", dispatch_params={"binding": "late"})
        self.seed = seed
        self.query_class = query_class
        # a prompt (and its first output token) past every instance's context fails that row
        self.max_prompt = max(max_context(s) for s in self.cluster) - 1 if self.cluster else 0
        self._ids = SegmentIds(first_unique=1)
        self._nodes: list[DagNode] = []
        self._barrier: tuple[str, ...] = ()
        self._report: dict[str, Any] | None = None
        self.flush = flush  # simulate the plan so far once it has FLUSH_CALLS calls
        self._parts: list[dict[str, Any]] = []  # reports of the plan's simulated parts

    def _segments(self, req: Request) -> tuple[Segment, ...]:
        return tuple(Segment(self._ids.shared(key), toks) for key, toks in req.parts if toks > 0)

    def run(self, requests: Sequence[Request], stage: str, output: OutputSpec, progress: Progress) -> list[Answer]:
        answers = []
        b = len(self._nodes)
        keys = []
        for k, req in enumerate(requests):
            if req.tokens > self.max_prompt:
                answers.append(Answer(None, f"prompt of {req.tokens} tokens exceeds the context of every "
                                            f"instance ({self.max_prompt + 1} tokens)", req.tokens))
                keys.append(None)
                continue
            text, out_toks = modelled_answer(req.prompt, output, self.seed, req.max_tokens)
            warm = None if req.after is None else keys[req.after]
            deps = self._barrier if warm is None else (warm,)
            keys.append(f"b{b}.{k}")
            self._nodes.append(DagNode(keys[-1], CallStep(stage, self._segments(req), max(1, out_toks)), deps))
            answers.append(Answer(text, None, req.tokens, 0))
        sent = tuple(k for k in keys if k is not None)
        if sent:  # the next operator starts when this batch is done (a zero-time barrier)
            self._nodes.append(DagNode(f"barrier{b}", OpStep("barrier", "barrier", 0.0), sent))
            self._barrier = (f"barrier{b}",)
        self._report = None
        if self.flush and len(self._nodes) >= FLUSH_CALLS:
            self._parts.append(simulate_plan(self.cluster, self.plan, self.policy, self.query_class))
            self._nodes, self._barrier = [], ()
        progress(len(sent), sum(r.tokens for r, k in zip(requests, keys, strict=True) if k is not None), 0)
        return answers

    def begin_statement(self) -> None:
        """A new plan: the statement's report is its own (each statement is one query)."""
        self._nodes, self._barrier, self._parts, self._report = [], (), [], None

    @property
    def plan(self) -> DagPlan:
        return DagPlan("llm_sql", tuple(self._nodes))

    def report(self) -> dict[str, Any]:
        if self._report is None:
            parts = [*self._parts, simulate_plan(self.cluster, self.plan, self.policy, self.query_class)]
            self._report = parts[0] if len(parts) == 1 else combine(parts)
        return self._report

    def close(self) -> None:
        pass


def combine(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One report of a plan simulated in parts, one after the other."""
    prompt = sum(p["prompt_tokens"] for p in parts)
    cached = sum(p["cached_tokens"] for p in parts)
    return {"latency_s": sum(p["latency_s"] for p in parts), "calls": sum(p["calls"] for p in parts),
            "failed": next((p.get("failed") for p in parts if p.get("failed")), None),
            "token_hit_rate": token_hit_rate(cached, prompt), "prompt_tokens": prompt, "cached_tokens": cached,
            "sim_wall_s": sum(p.get("sim_wall_s", 0.0) for p in parts), "answers": "modelled",
            "simulated_parts": len(parts)}


def simulate_plan(cluster: Sequence[InstanceSpec], plan: DagPlan, policy: PolicySpec,
                  query_class: QueryClass = "batch") -> dict[str, Any]:
    if not plan.nodes:
        return {"latency_s": 0.0, "calls": 0, "token_hit_rate": 0.0, "prompt_tokens": 0, "cached_tokens": 0,
                "answers": "modelled"}
    res = simulate(cluster, Workload("llm_sql", (QuerySpec(0, 0.0, plan, cls=query_class),)), policy)
    (q,) = res.queries
    prompt = sum(c.input_tokens for c in res.calls)
    cached = sum(c.cached_tokens for c in res.calls)
    return {"latency_s": q.latency, "calls": len(res.calls), "failed": q.failed,
            "token_hit_rate": token_hit_rate(cached, prompt),
            "prompt_tokens": prompt, "cached_tokens": cached, "sim_wall_s": res.sim_wall_s, "answers": "modelled"}
