"""Hand-built decisions for the scoring parts' tests: instances on a `PolicyHarness`, calls
of a query (interactive, batch, with or without a deadline), and load put on instances."""

from __future__ import annotations

import itertools

from helpers import ScriptProgram, call_state, ref_of

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.graph.runtime import QueryRun
from flowserve.policies.fcfs import FCFS
from flowserve.policies.scoring.plugin import Decision
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query

COST = cost_model_for("A100-80G", "llama-3.1-8b")
SLOW = cost_model_for("L4", "llama-3.1-8b")
P = tuple(range(1000))
_ids = itertools.count(10_000)


def harness_with(names: list[str], queue=FCFS, gpu: dict[str, str] | None = None
                 ) -> tuple[PolicyHarness, list[InstanceState]]:
    """Instances of llama-3.1-8b (A100 unless `gpu` names another, L4 only) on a harness with an index."""
    gpu = gpu or {}
    insts = [InstanceState(InstanceSpec(n, gpu.get(n, "A100-80G"), "llama-3.1-8b"),
                           SLOW if gpu.get(n) == "L4" else COST, queue()) for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def call(prompt: tuple[int, ...] = P, out: int = 16, cls: str = "interactive", deadline: float | None = None,
         tenant: str = "default") -> CallState:
    qid = next(_ids)
    q = Query(qid, 0.0, "w", ref_of(ScriptProgram([])), deadline, tenant, 0, cls)
    qs = QueryState(q, QueryRun(ScriptProgram([]), qid))
    cs = call_state(LLMCall(next(_ids), qid, "n", "s", "w", prompt, out, out, tenant=tenant), qs)
    cs.t_comp = COST.call_time(len(prompt), out)
    return cs


def load(inst: InstanceState, queued: int = 0, running: int = 0, tokens: int = 100) -> None:
    """Calls of `tokens` prompt tokens queued at and running on the instance."""
    for _ in range(queued):
        inst.queue.push(call(tuple(range(tokens))))
    for _ in range(running):
        cs = call(tuple(range(tokens)))
        inst.running[cs.id] = cs


def decision(h: PolicyHarness, cs: CallState, insts: list[InstanceState], now: float = 0.0) -> Decision:
    return Decision(cs, insts, h.at(now))
