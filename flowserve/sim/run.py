"""Simulate a workload on a cluster under a policy pair: the simulator's front door."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from flowserve.core.scheduler import SchedulerCore
from flowserve.graph.passes import make_passes
from flowserve.graph.plan import standalone_latency
from flowserve.graph.registry import WorkflowRegistry
from flowserve.graph.replay import PlanWorkflow, plan_oracle
from flowserve.graph.workflow import Workflow
from flowserve.policies import DispatchPolicy, make_dispatch, queue_factory
from flowserve.policies.registry import PolicyRef, policy_name
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.instance import InstanceProfile, instance_profile, kv_capacity, max_context, roofline_for
from flowserve.profiles.ops import op_profile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.sim.clairvoyant import ClairvoyantPredictor
from flowserve.sim.kv_views import CacheView, PublishingEngine, viewed_engine, viewed_spec
from flowserve.sim.replicas import ReplicaCores
from flowserve.sim.simulator import QueryOutcome, SimQuery, SimResult, Simulator
from flowserve.tokenize.prompts import SimTokenizer
from flowserve.tune.online import TuningServices
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, WorkflowRef
from flowserve.workloads.base import AppQuery, QuerySpec, Workload


@dataclass(frozen=True)
class PolicySpec:
    """A policy pair: each a name, an import path, a class or a ready object
    (`flowserve.policies.registry`), with its constructor parameters."""

    dispatch: PolicyRef = "round_robin"
    queue: PolicyRef = "fcfs"
    dispatch_params: Mapping[str, Any] = field(default_factory=dict)
    queue_params: Mapping[str, Any] = field(default_factory=dict)
    passes: str | None = None  # graph passes ("none", "all" or a list)
    replicas: int = 1  # schedulers syncing every sync_ms, each taking queries in turn (flowserve.sim.replicas)
    sync_ms: float = 20.0

    @property
    def label(self) -> str:
        return f"{policy_name(self.dispatch)}+{policy_name(self.queue)}"

    def describe(self) -> dict[str, Any]:
        """The pair as plain data (reports, JSON)."""
        out = {"dispatch": policy_name(self.dispatch), "queue": policy_name(self.queue),
               "dispatch_params": dict(self.dispatch_params), "queue_params": dict(self.queue_params)}
        if self.replicas > 1:
            out.update(replicas=self.replicas, sync_ms=self.sync_ms)
        return out

    def uses_deadline(self) -> bool:
        d = make_dispatch(self.dispatch, self.dispatch_params)
        q = queue_factory(self.queue, self.queue_params)()
        return bool(d.uses_deadline or q.uses_deadline)


def standalone_times(workload: Workload, cluster: Sequence[InstanceSpec],
                     cost_models: Mapping[str, CostModel] | None = None) -> list[float]:
    """Each query's latency alone on the fastest instance (SLO = scale × this)."""
    # one instance of each kind of LLM instance (the same hardware, model and profile)
    kinds = list({(s.gpu, s.model, s.tp, s.model_spec, s.profile): s for s in cluster if s.kind == "llm"}.values())
    if cost_models is not None:
        costs = list({id(c): c for c in (cost_models[s.name] for s in cluster if s.kind == "llm")}.values())
    else:
        costs = [roofline_for(s) for s in kinds]
    others = [s for s in cluster if s.kind != "llm"]  # embedding, search, ... instances
    out = []
    for q in workload.queries:
        if not isinstance(q.plan, AppQuery):
            out.append(min(standalone_latency(q.plan, c) for c in costs))
        elif q.plan.standalone_s is not None:
            out.append(q.plan.standalone_s)
        else:  # on one instance of a kind; an app of several models on one instance of each
            layouts = [[spec] for spec in kinds] + ([kinds] if len({s.model for s in kinds}) > 1 else [])
            out.append(min(app_alone(q, [*layout, *others], workload, cost_models) for layout in layouts))
    return out


def app_alone(q: QuerySpec, cluster: Sequence[InstanceSpec], workload: Workload,
              cost_models: Mapping[str, CostModel] | None) -> float:
    """An app query's latency alone on one LLM instance (and the non-LLM instances), cold
    cache (inf when it cannot run there)."""
    alone = replace(workload, queries=(replace(q, arrival=0.0),))
    res = simulate(cluster, alone, PolicySpec(), standalone=[1.0], record_calls=False, cost_models=cost_models)
    [out] = res.queries
    return math.inf if out.failed else out.latency


APP = "app"  # the simulator's own workflow factory: an app query by its position in the workload


def workload_workflows(workload: Workload) -> WorkflowRegistry:
    """The factories the simulator's queries name: `plan` replays a recorded or generated
    plan (the ref carries the plan itself and what the workload lets the core expect of
    it, all frozen data); `app` builds the app query at that position of the workload
    (`AppQuery.make`: a fresh object per run)."""

    def app(i: int) -> Workflow:
        query = workload.queries[i].plan
        assert isinstance(query, AppQuery)
        return query.make()

    return WorkflowRegistry({PlanWorkflow.name: PlanWorkflow, APP: app})


def simulate(
    cluster: Sequence[InstanceSpec],
    workload: Workload,
    policy: PolicySpec,
    slo_scale: float | None = None,
    standalone: Sequence[float] | None = None,
    on_query_done: Callable[[QueryOutcome], None] | None = None,
    record_calls: bool = True,
    *,
    cost_models: Mapping[str, CostModel] | None = None,
    deadlines: Sequence[float | None] | None = None,
    dispatch: DispatchPolicy | None = None,
    jobs: Mapping[str, Callable[..., Any]] | None = None,
    clairvoyant: bool = False,
    cache_view: CacheView | None = None,
    believed_kv: Mapping[str, int] | None = None,
    engine_costs: Mapping[str, CostModel] | None = None,
) -> SimResult:
    """cost_models: per instance name, the model both the engine and the core use instead
    of the roofline (replaying a live cluster with its fitted profiles); deadlines: per
    query, seconds after arrival (None: no deadline), instead of slo_scale × standalone;
    dispatch: a ready-made dispatch policy object instead of `policy.dispatch`; jobs: the
    `RunJob` registry (`flowserve.tune.alpha.JOBS` for online α tuning); clairvoyant: the
    core predicts every call's true output length (the oracle bound of `bench compare`);
    cache_view: how the router learns what every engine caches (`flowserve.sim.kv_views`;
    None: as each instance is configured); believed_kv: per instance, the KV tokens the
    driver's estimate takes the engine to cache (the gateway's `cache_tokens`);
    engine_costs: per instance name, the cost model its simulated engine runs at where it
    differs from what the core believes (engines that share a host's cores run slower than
    each was profiled alone: `ScaledCost`).

    A query that cannot run (a prompt longer than every serving instance's context)
    fails alone; the result counts it with its reason."""
    if standalone is None:
        standalone = standalone_times(workload, cluster, cost_models)
    if dispatch is None:
        dispatch = make_dispatch(policy.dispatch, policy.dispatch_params)

    def profile(spec: InstanceSpec) -> InstanceProfile:
        if cost_models is None:
            return instance_profile(spec)
        return InstanceProfile(cost_models[spec.name], max_context(spec), kv_capacity(spec))

    cluster = [viewed_spec(s, cache_view) for s in cluster]

    def new_core(dispatch: DispatchPolicy) -> SchedulerCore:
        predictor = (ClairvoyantPredictor(workload, workload.output_priors) if clairvoyant
                     else OutputPredictor(workload.output_priors))
        return SchedulerCore(cluster, dispatch, queue_factory(policy.queue, policy.queue_params), profile, predictor,
                             record_calls=record_calls, tokenizer=SimTokenizer(), passes=make_passes(policy.passes),
                             workflows=workflows, services=TuningServices(policy.queue, policy.queue_params))

    workflows = workload_workflows(workload)
    core: SchedulerCore | ReplicaCores = new_core(dispatch)
    if policy.replicas > 1:  # each replica its own policy objects, as each live replica has
        others = [make_dispatch(policy.dispatch, policy.dispatch_params) for _ in range(policy.replicas - 1)]
        core = ReplicaCores([core, *map(new_core, others)], policy.sync_ms / 1000)
    engines = [viewed_engine(s, (engine_costs or {}).get(s.name) or profile(s).cost, kv_capacity(s),
                             core.keeps_prefix_index, cache_view, (believed_kv or {}).get(s.name),
                             core.wants_prefill_done) for s in cluster if s.kind == "llm"]
    for engine in engines:
        if isinstance(engine, PublishingEngine):
            for ev in engine.announce(0.0):  # the publisher's first batch, before any query
                core.handle(ev)
    op_profiles = {s.name: s.op_profile or op_profile(s.kind) for s in cluster if s.kind != "llm"}

    if deadlines is not None:
        assert len(deadlines) == len(workload.queries), (len(deadlines), len(workload.queries))

    def queries() -> Any:
        for i, (spec, alone) in enumerate(zip(workload.queries, standalone, strict=True)):
            plan = spec.plan
            if isinstance(plan, AppQuery):
                ref, oracle = WorkflowRef(APP, (i,)), plan.oracle
            else:
                ref, oracle = workload.plan_ref(plan), plan_oracle(plan)
            if deadlines is not None:
                rel = deadlines[i]
                deadline = None if rel is None else spec.arrival + rel
            else:
                deadline = None if slo_scale is None else spec.arrival + slo_scale * alone
            if spec.cls == "batch":
                deadline = None  # batch work has no SLO
            yield SimQuery(Query(spec.id, spec.arrival, plan.workflow, ref, deadline,
                                 spec.tenant, spec.priority, spec.cls), alone, oracle)

    return Simulator(core, engines, queries(), tick_s=core.tick_s, on_query_done=on_query_done,
                     jobs=jobs, op_profiles=op_profiles).run()
