"""The live driver: asyncio IO around the very `SchedulerCore` the simulator drives.

One task owns the core. Everything that happens — a query arriving or cancelled, an engine answering or failing, a
tool finishing, a tokenization, a job ending, a tick, an engine's cache events — is put on one `asyncio.Queue`; the
task takes the items one at a time, stamps them with the driver's clock (`time.monotonic()`), hands them to
`core.handle` and executes the commands it returns through one table (`LiveDriver.COMMANDS`): calls go to the call
runner (`flowserve.host.calls`: engine tasks, retries, circuit breakers; it never chooses an instance), ops to
tools, tokenizations to the engines' tokenizers, a query's end to its client's future (every accepted query gets
one), jobs to workers. What the driver did is published as facts (`flowserve.host.facts`) to the listeners the
composition root (`flowserve.host.root`) registered.

Admission (`flowserve.host.admission`) is decided when an arrival is taken off the queue, on the core's own state,
so it never races with it. The driver reads the core only through its query API.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from flowserve.core.policy import DispatchPolicy
from flowserve.core.scheduler import SchedulerCore
from flowserve.engines.backend import TokenSink
from flowserve.errors import FailureKind
from flowserve.graph.oracle import Oracle
from flowserve.graph.registry import WorkflowRegistry
from flowserve.host.admission import Admission
from flowserve.host.cache_view import EstimatedCaches
from flowserve.host.calls import CallRunner
from flowserve.host.facts import CallEnded, CallSent, Listeners
from flowserve.host.inbox import STOP, Control, Inbox
from flowserve.host.instances import LiveInstances
from flowserve.host.jobs import JobRunner
from flowserve.host.kv_feeds import KVFeeds
from flowserve.host.live_calls import LiveCalls
from flowserve.host.metrics import GatewayMetrics
from flowserve.host.policy_params import PolicyParams
from flowserve.host.query import QueryHandle, QueryResult
from flowserve.host.query_book import QueryBook
from flowserve.host.query_feed import QueryFeed
from flowserve.host.routing_tokens import GatewayTokens
from flowserve.host.settings import GatewaySettings
from flowserve.host.tasks import TaskSet
from flowserve.host.tools import ToolRunner
from flowserve.retrieval.executors import RetrievalTools
from flowserve.types.commands import (
    CancelCall,
    PolicyChanged,
    QueryDone,
    QueryFailed,
    RunBatch,
    RunJob,
    RunOp,
    SendCall,
    StepDone,
    Tokenize,
)
from flowserve.types.events import (
    CallFailed,
    CallFinished,
    Event,
    OpFinished,
    QueryArrived,
    QueryCancelled,
    Tick,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, QueryClass, ToolOp, WorkflowRef

log = logging.getLogger("flowserve.gateway")


@dataclass(frozen=True)
class DriverParts:
    """What the composition root (`flowserve.host.root.compose_driver`) built for the driver."""

    settings: GatewaySettings
    clock: Callable[[], float]
    inbox: Inbox
    tasks: TaskSet
    core: SchedulerCore
    dispatch: DispatchPolicy  # the core's, for status pages and tests
    workflows: WorkflowRegistry
    tokens: GatewayTokens
    metrics: GatewayMetrics
    calls: LiveCalls
    runner: CallRunner
    caches: EstimatedCaches
    kv: KVFeeds
    params: PolicyParams
    admission: Admission
    tools: ToolRunner
    retrieval: RetrievalTools  # the tools' retrieval components
    jobs: JobRunner
    book: QueryBook
    listeners: Listeners
    instances: tuple[InstanceSpec, ...]
    closing: tuple[Callable[[], Awaitable[None]], ...]  # what shutdown closes after the loop ended


class LiveDriver:
    def __init__(self, parts: DriverParts) -> None:
        """Built by `compose_driver`; `workflows`: factories the queries' `WorkflowRef`s may
        name (more can be registered on `self.workflows` before they are used)."""
        self.settings = parts.settings
        self.clock = parts.clock
        self._inbox = parts.inbox
        self._put = parts.inbox.put
        self._control = parts.inbox.control
        self._tasks = parts.tasks
        self.core = parts.core
        self.dispatch = parts.dispatch
        self.workflows = parts.workflows
        self.tokens = parts.tokens
        self.metrics = parts.metrics
        self.calls = parts.calls
        self.runner = parts.runner
        self.caches = parts.caches
        self.kv = parts.kv
        self.params = parts.params
        self.admission = parts.admission
        self.tools = parts.tools
        self.retrieval = parts.retrieval
        self.jobs = parts.jobs
        self.book = parts.book
        self.facts = parts.listeners  # who hears what the host did (`flowserve.host.facts`)
        self._publish = parts.listeners.publish
        self.emit = parts.inbox.put  # an event for the core from outside the loop (a replica's, an engine's)
        self._closing = parts.closing
        self._initial = parts.instances
        self.live = LiveInstances(self.core, self.runner, self._control, self._feed, self._initial,
                                  self.kv.token_checks)
        self.inputs = QueryFeed(self._control, self._feed, self.book.open)  # programs' calls
        self._ids = itertools.count(1)  # query ids
        self._loop_task: asyncio.Task[None] | None = None
        self._draining = False
        self._drained: asyncio.Event | None = None
        self._tick_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        assert self._loop_task is None, "started twice"
        self._inbox.open()
        self._drained = asyncio.Event()
        for spec in self._initial:  # non-LLM engines run their ops on `self.tools`' executors
            if spec.kind == "llm":
                self.runner.open_instance(spec)
        self._loop_task = asyncio.create_task(self._run(), name="flowserve-driver")
        tick = self.core.tick_s
        if tick:
            self._tick_timer = asyncio.get_running_loop().call_later(tick, self._tick, tick)
        for down in await self.live.unanswered(self._initial):  # before the first query
            self._put(down)

    async def drain(self, timeout_s: float | None = None) -> None:
        """Stop taking queries (503) and let the open ones finish, up to the timeout; the
        rest fail with that reason (clients get a 503 JSON body or an in-band error event)."""
        if self._loop_task is None:
            return
        self._draining = True
        self._inbox.progressed()
        timeout = self.settings.drain_timeout_s if timeout_s is None else timeout_s
        if self.book.open:
            assert self._drained is not None
            self._drained.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), timeout)
        for h in list(self.book.open.values()):
            self._fail(h, FailureKind.SHUTDOWN, f"the gateway shut down before the query finished "
                                                f"(drain timeout {timeout:g} s)", self.clock())

    async def shutdown(self, drain_timeout_s: float | None = None) -> None:
        """Drain (see `drain`), then stop every task and engine connection."""
        if self._loop_task is None:
            return
        await self.drain(drain_timeout_s)
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        self._put(STOP)
        await self._loop_task
        await self._tasks.cancel_all()
        for close in self._closing:
            await close()
        self._loop_task = None

    @property
    def draining(self) -> bool:
        return self._draining

    # ------------------------------------------------------------------ public API

    def number_queries_from(self, first: int) -> None:
        """Number the next queries from `first` (a replica's start at its number: unique
        across replicas)."""
        self._ids = itertools.count(first)

    def new_query(self, workflow: str, ref: WorkflowRef, model: str | None = None, tenant: str = "default",
                  priority: int = 0, slo_s: float | None = None, sink: TokenSink | None = None,
                  oracle: Oracle | None = None, cls: QueryClass = "interactive") -> QueryHandle:
        """A query named `workflow` (metrics) running the workflow `ref` names (one of
        `self.workflows`)."""
        loop = asyncio.get_running_loop()
        return QueryHandle(next(self._ids), workflow, ref, model, tenant, priority,
                           None if cls == "batch" else slo_s, loop.create_future(), loop.create_future(), sink,
                           oracle, cls=cls, routed=loop.create_future())

    async def submit(self, handle: QueryHandle) -> QueryHandle:
        """Hand a query to the core; returns once it is accepted (raises `Rejected`)."""
        self._put(handle)
        await handle.accepted
        return handle

    async def run(self, workflow: str, ref: WorkflowRef, **kw: Any) -> QueryResult:
        h = await self.submit(self.new_query(workflow, ref, **kw))
        return await h.done

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Wait until `predicate()` holds, re-checked after each item the driver takes (raises TimeoutError)."""
        await self._inbox.until(predicate, timeout_s)

    def cancel(self, query_id: int, reason: str) -> None:
        """Nobody waits for the query any more: the core fails it with `reason` (`QueryCancelled`)."""
        if query_id in self.book.open:
            self._put(QueryCancelled(self.clock(), query_id, reason))

    def query(self, query_id: int) -> QueryHandle | None:
        return self.book.get(query_id)

    @property
    def policy_log(self) -> Sequence[PolicyChanged]:
        """The parameter changes policies announced (the latest `PolicyParams.KEPT`)."""
        return self.params.log

    @property
    def open_queries(self) -> int:
        return len(self.book.open)

    async def add_instance(self, spec: InstanceSpec) -> bool:
        """Add (or replace) an instance; whether its engine answered (`LiveInstances.add`)."""
        return await self.live.add(spec)

    async def remove_instance(self, name: str) -> None:
        await self.live.remove(name)

    def instances(self) -> list[dict[str, Any]]:
        return self.live.rows()

    def models(self) -> list[str]:
        return sorted({s.spec.model for s in self.live.status() if s.up})

    def serves(self, model: str) -> bool:
        return any(s.spec.model.lower() == model.lower() for s in self.live.status())

    def max_context(self, model: str | None) -> int | None:
        return self.core.max_context(model)

    def circuit_state(self, name: str) -> str:
        return self.runner.circuit_state(name)

    async def tokenize(self, text: str, model: str | None) -> list[int]:
        return await self.tokens.text(text, model)

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        inbox = self._inbox
        while True:
            item = await inbox.get()
            if item is STOP:
                return
            now = self.clock()
            try:
                if isinstance(item, QueryHandle):
                    self._arrive(item, now)
                elif isinstance(item, Control):
                    item.run(now)
                else:
                    self._feed(dataclasses.replace(item, time=now))
                    if isinstance(item, OpFinished):
                        self.book.op_ended(item.op_id)
            except Exception as e:  # a bug: say so loudly, end the query it hit, keep serving the others
                log.exception("driver failed on %r", item)
                h = self.book.query_of(item)
                if h is not None and not h.done.done():
                    self._fail(h, FailureKind.INTERNAL, f"internal error while scheduling the query: "
                                                        f"{type(e).__name__}: {e}", now)
            inbox.progressed()

    def _arrive(self, h: QueryHandle, now: float) -> None:
        refused = self.admission.check(len(self.book.open), h.model, self._draining)
        if refused is not None:
            if refused.status == 429:
                self.metrics.queries.labels(h.workflow, "rejected").inc()
            h.accepted.set_exception(refused)
            return
        deadline = None if h.slo_s is None else now + h.slo_s
        self.book.opened(h, now)
        h.accepted.set_result(None)
        self._feed(QueryArrived(now, Query(h.id, now, h.workflow, h.workflow_ref, deadline, h.tenant, h.priority,
                                           h.cls)))

    def _feed(self, ev: Event) -> None:
        now = ev.time
        if isinstance(ev, CallFinished | CallFailed):  # before the core moves on: is it the current attempt?
            self._publish(CallEnded(now, ev.call_id, ev.instance, ev, self.core.is_current(ev.call_id, ev.instance)))
        handlers = self.COMMANDS
        for cmd in self.core.handle(ev):
            handler = handlers.get(type(cmd))
            if handler is None:
                raise TypeError(f"the live driver has no handler for command {cmd!r}")
            handler(self, cmd, now)

    def _send(self, cmd: SendCall, now: float) -> None:
        call = cmd.call
        h = self.book.open.get(call.query_id)
        lc = self.calls.track(call.id, h)
        if h is not None:
            ch = h.channel(call.node)
            sink = ch.sink
            if sink is not None and sink.committed:  # the client saw text, or the proxy has it: never a second answer
                self._put(CallFailed(now, call.id, cmd.instance, f"the engine failed {sink.committed_how}; not "
                                     f"retried", False))
                return
            if ch.routed is not None and not ch.routed.done():
                ch.routed.set_result(cmd.instance)
        lc.attempt(call, cmd.instance, now)
        self._publish(CallSent(now, call, cmd.instance, h.ticket if h is not None else None))
        self.runner.send(lc)

    def _cancel(self, cmd: CancelCall, now: float) -> None:
        if self.runner.cancel(cmd.call_id, cmd.instance):
            self._publish(CallEnded(now, cmd.call_id, cmd.instance, None, True))

    def _run_ops(self, ops: Sequence[ToolOp], instance: InstanceSpec | None) -> None:
        for op in ops:  # each on its executor (a non-LLM engine's batch: its ops)
            self.book.op_started(op.id, op.query_id)
            self._tasks.spawn(self._op_task(op, instance))

    def _tokenize(self, cmd: Tokenize, now: float) -> None:
        h = self.book.open.get(cmd.query_id)
        if h is not None:
            self.calls.track(cmd.call_id, h)
        self._tasks.spawn(self._tokenize_task(cmd))

    def _query_done(self, cmd: QueryDone, now: float) -> None:
        if (h := self.book.open.get(cmd.query_id)) is not None:
            self._resolve(h, now, cmd.deadline_met, cmd)

    def _query_failed(self, cmd: QueryFailed, now: float) -> None:
        if (h := self.book.open.get(cmd.query_id)) is not None:
            self._fail(h, cmd.kind, cmd.reason, now, cmd)

    def _policy_changed(self, cmd: PolicyChanged, now: float) -> None:
        self._publish(cmd)

    # The one command table: every command the core issues has its handler (a test checks).
    COMMANDS: ClassVar[Mapping[type, Callable[[LiveDriver, Any, float], None]]] = {
        SendCall: _send, CancelCall: _cancel, Tokenize: _tokenize, QueryDone: _query_done,
        QueryFailed: _query_failed, PolicyChanged: _policy_changed,
        RunOp: lambda d, cmd, now: d._run_ops((cmd.op,), None),
        RunBatch: lambda d, cmd, now: d._run_ops(cmd.ops, d.live.op_specs.get(cmd.instance)),
        StepDone: lambda d, cmd, now: d.book.step_done(cmd, now),
        RunJob: lambda d, cmd, now: d.jobs.run(cmd),
    }

    # ------------------------------------------------------------------ queries

    def _fail(self, h: QueryHandle, kind: FailureKind, reason: str, now: float,
              failed: QueryFailed | None = None) -> None:
        """`failed`: the core's command, when the core failed the query (its calls are recorded)."""
        self._resolve(h, now, False if h.slo_s is not None else None, failure=(kind, reason), failed=failed)

    def _resolve(self, h: QueryHandle, now: float, met: bool | None, done: QueryDone | None = None,
                 failure: tuple[FailureKind, str] | None = None, failed: QueryFailed | None = None) -> None:
        self.book.resolve(h, now, met, done, failure, failed)
        if self._draining and not self.book.open and self._drained is not None:
            self._drained.set()

    # ------------------------------------------------------------------ ops, tokens, jobs, ticks

    async def _op_task(self, op: ToolOp, instance: InstanceSpec | None = None) -> None:
        h = self.book.open.get(op.query_id)
        replayed = h.oracle.tool(op.node) if h is not None and h.oracle is not None else None
        self._put(await self.tools.finish(op, replayed, self.clock, instance))

    async def _tokenize_task(self, cmd: Tokenize) -> None:
        self._put(await self.tokens.tokenized(cmd, self.clock))

    def _tick(self, every: float) -> None:
        self._put(Tick(self.clock()))
        self._tick_timer = asyncio.get_running_loop().call_later(every, self._tick, every)


