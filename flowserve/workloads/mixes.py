"""Workloads of `bench compare`: each kind alone, and mixes of kinds, classes and tenants.

`SINGLE` names every workload run alone (cluster, builder), `MIXED` the mixes, `EXTRA` those
run only when named (`lora`); the mixes' batch work is LLM-in-SQL statements
(`flowserve.workloads.sql_jobs`). Mixing needs prompts of different workloads not to share
segment ids by accident: each part is shifted into its own id range.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from flowserve.graph.plan import CallStep, DagNode, DagPlan, Plan, Segment
from flowserve.types.work import QueryClass
from flowserve.workloads import load_workload
from flowserve.workloads.base import AppQuery, Workload
from flowserve.workloads.sql_jobs import llm_sql_job

ID_STRIDE = 10_000_000  # segment ids of one mix part: [k·stride, (k+1)·stride)


@dataclass(frozen=True)
class Case:
    name: str
    cluster: str
    build: Callable[[int, int], Workload]  # (queries, seed) → workload
    tenant_weights: str = ""  # the flowserve queue's weights for this case
    mixed: bool = False
    batch_only: bool = False  # no interactive work: judged by the batch work's latency
    by_latency: bool = False  # judged by mean latency (`bench programs`' figure), not the SLO scale


def _shift_item(item, offset: int):
    if not isinstance(item, CallStep):
        return item
    return dataclasses.replace(item, prompt=tuple(Segment(s.id + offset, s.length) for s in item.prompt))


def shift_plan(plan: Plan | AppQuery, offset: int) -> Plan | AppQuery:
    """The plan with every segment id moved by `offset` (no sharing across mix parts); an
    app's query makes its own prompts and is left as it is."""
    if isinstance(plan, AppQuery):
        return plan
    if isinstance(plan, DagPlan):
        return dataclasses.replace(plan, nodes=tuple(DagNode(n.key, _shift_item(n.item, offset), n.deps)
                                                     for n in plan.nodes))
    return dataclasses.replace(plan, steps=tuple(tuple(_shift_item(i, offset) for i in step) for step in plan.steps))


def tag(w: Workload, part: int, tenant: str = "default", cls: QueryClass = "interactive") -> Workload:
    qs = tuple(dataclasses.replace(q, plan=shift_plan(q.plan, part * ID_STRIDE), tenant=tenant, cls=cls)
               for q in w.queries)
    return dataclasses.replace(w, queries=qs)


def mix(name: str, parts: list[Workload]) -> Workload:
    merged = sorted((q for w in parts for q in w.queries), key=lambda q: q.arrival)
    queries = tuple(dataclasses.replace(q, id=i) for i, q in enumerate(merged))
    priors: dict = {}
    expectations: dict = {}
    for w in parts:
        priors.update(w.output_priors)
        expectations.update(w.expectations)
    return Workload(name, queries, expectations, priors)


def _builtin(ref: str, rate: float) -> Callable[[int, int], Workload]:
    return lambda n, seed: load_workload(ref, {"rate": rate, "queries": n, "seed": seed})


PREBLE_RATES = {"tool_use": 40, "embodied_agent": 6, "programming": 1.0, "video_qa": 3, "long_doc_qa": 1}
PREBLE_CALLS = {"embodied_agent": 19, "programming": 8}


PREBLE_MAX_CALLS = 2000


def _preble(kind: str) -> Callable[[int, int], Workload]:
    """At least n/2 seconds of arrivals at the Preble bench's rate and 4n calls (at most
    PREBLE_MAX_CALLS calls): enough for the cache to matter, small enough for `--quick`."""
    def build(n: int, seed: int) -> Workload:
        rate = PREBLE_RATES[kind]
        cap = PREBLE_MAX_CALLS // PREBLE_CALLS.get(kind, 1)
        q = int(min(cap, max(8, rate * n / 2, 4 * n / PREBLE_CALLS.get(kind, 1))))
        return load_workload(kind, {"rate": rate, "queries": q, "seed": seed, "max_prompt": 30_000})
    return build


def _mixed_classes(n: int, seed: int) -> Workload:
    """text2sql (tenant gold) + tool_use (tenant free), interactive, plus LLM-in-SQL
    statements as batch work (one per ten interactive text2sql queries)."""
    t2s = load_workload("text2sql-mixed", {"rate": 0.5, "queries": n, "seed": seed})
    horizon = max(q.arrival for q in t2s.queries)
    tools = load_workload("tool_use", {"rate": 2.0, "queries": max(4, int(2.0 * horizon)), "seed": seed + 1})
    k = max(2, n // 10)
    job = llm_sql_job(k, seed + 2, start_s=horizon * 0.1, every_s=0.8 * horizon / k)
    return mix("mixed", [tag(t2s, 0, "gold"), tag(tools, 1, "free"), tag(job, 2, "etl", "batch")])


def _statements(n: int, seed: int) -> Workload:
    """LLM-in-SQL statements alone: one per ten queries of the bench's size, one every 5 s."""
    return llm_sql_job(max(4, n // 10), seed, every_s=5.0)


def _programs(n: int, seed: int) -> Workload:
    """Agentic programs as `flowserve bench programs` makes them (prefill-heavy agent calls),
    at its near-saturation rate: their calls and stages are learnt online, as live."""
    from flowserve.workloads.programs import AGENT_SHAPE, program_traces, traced_workload

    return traced_workload("programs", program_traces(n, PROGRAMS_RATE, seed, AGENT_SHAPE))


PROGRAMS_RATE = 0.5  # programs per second: about 80% of what the cluster completes (0.6–0.66 /s)


def _two_tenants(n: int, seed: int) -> Workload:
    """Two tenants 3:1 on one workload: `free` floods at 3× `gold`'s rate."""
    gold = load_workload("text2sql-mixed", {"rate": 0.3, "queries": n, "seed": seed})
    free = load_workload("text2sql-mixed", {"rate": 0.9, "queries": 3 * n, "seed": seed + 1})
    return mix("two-tenants", [tag(gold, 0, "gold"), tag(free, 1, "free")])


SINGLE: dict[str, Case] = {
    "text2sql": Case("text2sql", "hetero-1", _builtin("text2sql-mixed", 1.0)),
    "chess-trace1": Case("chess-trace1", "hetero-1", _builtin("chess-trace1", 1.0)),
    **{k: Case(k, "preble-a6000", _preble(k)) for k in PREBLE_RATES},
}
TEOLA_RATES = {"search_gen": 1.7, "naive_rag": 0.5, "advanced_rag": 0.5}  # the built-in workloads' rates
SINGLE.update({app: Case(app, "teola", _builtin(app, rate)) for app, rate in TEOLA_RATES.items()})
SINGLE["llm_sql"] = Case("llm_sql", "preble-a6000", _statements, batch_only=True)
SINGLE["programs"] = Case("programs", "preble-a6000", _programs, by_latency=True)
# on request only (`bench compare --workload lora`): requests to 32 LoRA adapters (Zipf) on
# instances that hold four at a time; four calls per interactive query of the bench's size
EXTRA: dict[str, Case] = {
    "lora": Case("lora", "lora-a100", lambda n, seed: load_workload("lora", {"queries": 4 * n, "seed": seed})),
}
MIXED: dict[str, Case] = {
    "mixed": Case("mixed", "hetero-1", _mixed_classes, "gold:3,free:1", mixed=True),
    "two-tenants": Case("two-tenants", "hetero-1", _two_tenants, "gold:3,free:1", mixed=True),
}
