"""The live host's composition root: the one place that builds the scheduler core, the
live driver and the engines' backends, and registers everything else as a listener of
the host's facts (`flowserve.host.facts`).

`compose_driver` builds a driver and all it drives: the core, the tokenizers, the call
runner (whose backend factory makes each instance's backend), the live calls, the
estimated caches, the KV feeds, the recorder, the metrics, tools and jobs, and the table
that names, for each fact, who hears it. `LiveHost` (the faces' host: `flowserve.gateway` and
`flowserve.picker`) adds the served workflows, the programs — their store chosen here:
this process's own, or the replicas' registry in Redis — and a replica's sync. Nothing
sets a hook on another object: what one part must learn from another arrives as a fact,
or as a function given to its constructor.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from flowserve.apps.base import WorkflowDef
from flowserve.apps.single import SingleCall
from flowserve.core.scheduler import SchedulerCore
from flowserve.graph.passes import make_passes
from flowserve.graph.program import Program
from flowserve.graph.registry import WorkflowFactory, WorkflowRegistry
from flowserve.graph.replay import PlanWorkflow
from flowserve.host.admission import Admission
from flowserve.host.backends import BackendContext, BackendFactory, default_backend, live_profile
from flowserve.host.cache_view import EstimatedCaches
from flowserve.host.calls import CallRunner
from flowserve.host.driver import DriverParts, LiveDriver
from flowserve.host.facts import (
    CallEnded,
    CallSent,
    InstanceClosed,
    InstanceOpened,
    Listener,
    Listeners,
    ProgramEnded,
    QueryEnded,
)
from flowserve.host.inbox import Inbox
from flowserve.host.intake.openai_api import APIError
from flowserve.host.jobs import JobRunner
from flowserve.host.kv_feeds import KVFeeds
from flowserve.host.live_calls import LiveCalls
from flowserve.host.metrics import CoreCollector, GatewayMetrics
from flowserve.host.policy_params import PolicyParams
from flowserve.host.programs.book import LivePrograms
from flowserve.host.programs.shared import SharedPrograms
from flowserve.host.programs.store import LocalPrograms, ProgramStore
from flowserve.host.query import QueryHandle, Rejected
from flowserve.host.query_book import QueryBook
from flowserve.host.record import QueryRecorder
from flowserve.host.replica import Replica
from flowserve.host.routing_tokens import GatewayTokens
from flowserve.host.served import ServedWorkflows
from flowserve.host.settings import GatewaySettings, ServeConfig
from flowserve.host.tasks import TaskSet
from flowserve.host.tools import ToolRunner
from flowserve.policies import make_dispatch, policy_name, queue_factory
from flowserve.profiles.predictor import OutputPredictor
from flowserve.retrieval.executors import RetrievalTools
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.tune.alpha import JOBS
from flowserve.tune.online import TuningServices
from flowserve.types.commands import PolicyChanged
from flowserve.types.specs import InstanceSpec

ListenerTable = Mapping[type, Sequence[Listener]]


def compose_driver(instances: Sequence[InstanceSpec], settings: GatewaySettings,
                   backend_factory: BackendFactory | None = None,
                   output_priors: dict[tuple[str, str], float] | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   jobs: Mapping[str, Callable[..., Any]] | None = None,
                   segments: TokenMaterializer | None = None,
                   workflows: Mapping[str, WorkflowFactory] | None = None,
                   listeners: ListenerTable | None = None) -> LiveDriver:
    """A live driver and everything it drives. jobs: the RunJob registry (default: the α
    sweep); segments: how replayed prompt segments become real token ids (`flowserve
    validate`); workflows: factories the queries' `WorkflowRef`s may name beyond the
    built-in one-call, program and plan workflows; listeners: more listeners of the host's
    facts, heard after the built-in ones (a replica's)."""
    s = settings
    inbox, tasks = Inbox(), TaskSet()
    factory = backend_factory or default_backend
    # the tokenizers ask the core and the runner, built below, only when they tokenize
    tokens = GatewayTokens(lambda: core.instance_status(), lambda name: runner.tokenizer(name),
                           lambda name: runner.circuit_state(name), s.tokenizers, segments, s.chat_templates)
    registry = WorkflowRegistry({SingleCall.name: SingleCall, Program.name: Program, PlanWorkflow.name: PlanWorkflow,
                                 **(workflows or {})})
    dispatch, queues = make_dispatch(s.dispatch, s.dispatch_params), queue_factory(s.queue, s.queue_params)
    core = SchedulerCore(instances, dispatch, queues, lambda spec: live_profile(spec, s.time_scale),
                         OutputPredictor(output_priors), max_retries=s.redispatch_limit, tokenizer=tokens,
                         passes=make_passes(s.passes), workflows=registry,
                         services=TuningServices(s.queue, s.queue_params))
    metrics = GatewayMetrics(policy_name(s.dispatch), s.metrics_tenants,
                             core.prefix_hit if core.keeps_prefix_index else None)
    calls = LiveCalls()
    backends = BackendContext(s, clock, inbox.put, core.keeps_prefix_index, core.wants_prefill_done)
    runner = CallRunner(s, calls, metrics, clock, inbox.put, tasks.spawn, lambda spec: factory(spec, backends),
                        lambda fact: table.publish(fact))
    metrics.attach(CoreCollector(core.instance_status, runner.circuit_state))
    caches = EstimatedCaches(s, inbox.put, clock, lambda name, n: metrics.evicted.labels(name).inc(n),
                             core.keeps_prefix_index)
    kv = KVFeeds(inbox.put, clock, lambda: inbox.until(lambda: inbox.qsize() <= 1, 3600.0), metrics, core, tokens,
                 caches.resident, tasks.spawn, s.slots_poll_s)  # the engines' cache events
    recorder = QueryRecorder(s.record, clock(), s.time_scale, metrics.record_errors.inc) if s.record else None
    params = PolicyParams()
    book = QueryBook(calls, lambda fact: table.publish(fact),
                     lambda status: metrics.queries.labels("program-call", status).inc())
    retrieval = RetrievalTools(s.retrieval)
    tools = ToolRunner(s.time_scale, s.sql_time_limit_s, retrieval.executors(), s.sql_workers, s.sql_memory_mb << 20)
    job_runner = JobRunner(s.jobs, dict(JOBS if jobs is None else jobs), clock, inbox.put,
                           lambda outcome: metrics.jobs.labels(outcome).inc())
    # who hears what, in order: the cache estimate before the metrics count its evictions' causes
    own: dict[type, list[Listener]] = {
        InstanceOpened: [caches.opened, kv.opened],
        InstanceClosed: [caches.closed, kv.closed],
        CallSent: [metrics.call_sent, caches.call_sent, *([recorder.call_sent] if recorder else [])],
        CallEnded: [caches.call_ended, metrics.call_ended, book.call_ended],
        QueryEnded: [metrics.query_ended, *([recorder.query_ended] if recorder else [])],
        ProgramEnded: [metrics.program_ended],
        PolicyChanged: [params.changed, metrics.policy_changed],
    }
    for fact, more in (listeners or {}).items():
        own.setdefault(fact, []).extend(more)
    table = Listeners(own)

    async def close_recorder() -> None:
        if recorder is not None:
            recorder.close()

    async def close_tools() -> None:
        tools.close()
        job_runner.shutdown()

    # the feeds before the backends they read (`/slots`), the recorder last
    closing: tuple[Callable[[], Awaitable[None]], ...] = (kv.aclose, runner.aclose, retrieval.aclose, close_tools,
                                                         close_recorder)
    return LiveDriver(DriverParts(
        settings=s, clock=clock, inbox=inbox, tasks=tasks, core=core, dispatch=dispatch, workflows=registry,
        tokens=tokens, metrics=metrics, calls=calls, runner=runner, caches=caches, kv=kv, params=params,
        admission=Admission(s.max_queries, s.max_queue_s, core.predicted_wait_s), tools=tools,
        retrieval=retrieval, jobs=job_runner, book=book, listeners=table, instances=tuple(instances),
        closing=closing))


class LiveHost:
    """The host both faces serve from (`flowserve.gateway`, `flowserve.picker`): a driver
    (`compose_driver`), the served workflows, the programs, and — with `gateway.state` —
    this process as one replica of a shared state, whose program store is then the
    replicas' registry."""

    def __init__(self, config: ServeConfig, backend_factory: BackendFactory | None = None,
                 workflows: Mapping[str, WorkflowDef] | None = None) -> None:
        self.config = config
        s = config.gateway
        self.replica = Replica(s.state, config.instances, s) if s.state is not None else None
        self.driver = compose_driver(config.instances, s, backend_factory,
                                     listeners=self.replica.listeners() if self.replica is not None else None)
        self.served = ServedWorkflows(s, self.driver, workflows)
        store: ProgramStore = LocalPrograms() if self.replica is None else \
            SharedPrograms(self.replica, s.programs, self.driver.emit, self.driver.clock,
                           s.state.summary_wait_s if s.state is not None else 0.0)
        self.programs = LivePrograms(self.driver, s.programs, self.driver.clock, store)

    @property
    def workflows(self) -> Mapping[str, WorkflowDef]:
        return self.served.defs

    @property
    def prepared(self) -> Mapping[str, Mapping[str, Any]]:
        return self.served.prepared

    async def start(self) -> None:
        if self.replica is not None:  # before the driver: a state that refuses this config stops the start
            await self.replica.join(self.driver, (self.programs,))
        await self.driver.start()
        if self.replica is not None:
            await self.replica.start()
        self.programs.start()
        if any(spec.kv_events is not None for spec in self.config.instances):
            # what start-up built lives as long as the host: out of the collector's full passes, which
            # otherwise stall the event loop for 100s of ms under a flood of engine cache events
            gc.collect()
            gc.freeze()

    async def stop(self) -> None:
        await self.programs.stop()
        await self.driver.shutdown()
        if self.replica is not None:
            await self.replica.leave()
        self.served.cleanup()

    def model_of(self, name: str) -> str:
        """The model a request names, if an instance serves it (else a 404)."""
        if not self.driver.serves(name):
            raise APIError(404, f"the model {name!r} does not exist; served: {', '.join(self.driver.models())}",
                           code="model_not_found", param="model")
        return name

    async def submit(self, h: QueryHandle) -> None:
        """Hand a query to the core; a refusal is the client's 429 or 503."""
        try:
            await self.driver.submit(h)
        except Rejected as e:
            headers = {"Retry-After": str(int(e.retry_after))} if e.retry_after else {}
            code = "rate_limit_exceeded" if e.status == 429 else "service_unavailable"
            raise APIError(e.status, e.reason, "server_error" if e.status >= 500 else "rate_limit_error",
                           code, headers=headers) from None
