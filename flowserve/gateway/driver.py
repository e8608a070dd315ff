"""The live driver: asyncio IO around the very `SchedulerCore` the simulator drives.

One task owns the core. Everything that happens — a query arriving, an engine answering
or failing, a tool finishing, a job ending, a tick — is put on one `asyncio.Queue`; the
task takes the items one at a time, stamps them with the driver's clock
(`time.monotonic()`), hands them to `core.handle` and executes the commands it returns:

* SendCall → an engine call task (retries with back-off on the same instance for
  retryable errors, the instance's circuit breaker; on final failure `CallFailed`, and
  the core re-dispatches — nothing here chooses an instance);
* CancelCall → cancel that task (the engine request is aborted);
* RunOp → a tool task (`flowserve.gateway.tools`) → OpFinished;
* QueryDone / QueryFailed → resolve the client's future (every accepted query gets one);
* PolicyChanged → log + metrics; RunJob → a worker (process or thread pool) → JobFinished.

Admission control reads the core's view when the arrival is taken off the queue (no
race with the core's state): more predicted queueing than `max_queue_s` on the best
instance, or more than `max_queries` open, is a 429 with Retry-After; while draining, 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from flowserve.apps.registry import LiveProgram
from flowserve.core import SchedulerCore
from flowserve.engines.backend import Backend, CallOutcome, EngineError, payload_of
from flowserve.engines.cache_estimate import CacheEstimate
from flowserve.engines.scaled_cost import ScaledCost
from flowserve.engines.simbackend import SimBackend
from flowserve.engines.tokenizer import Tokenizer, WordTokenizer
from flowserve.gateway.breaker import CircuitBreaker, backoff_delay
from flowserve.gateway.jobs import JobRunner
from flowserve.gateway.metrics import CoreCollector, GatewayMetrics
from flowserve.gateway.query import CallReport, QueryHandle, QueryResult, Rejected
from flowserve.gateway.settings import GatewaySettings
from flowserve.gateway.tools import ToolError, ToolRunner
from flowserve.policies import make_dispatch, queue_factory
from flowserve.profiles.instance import InstanceProfile, instance_profile, kv_capacity, roofline_for
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types import (
    CallFailed,
    CallFinished,
    CancelCall,
    Command,
    Event,
    InstanceDown,
    InstanceSpec,
    InstanceUp,
    LLMCall,
    OpFinished,
    PolicyChanged,
    Query,
    QueryArrived,
    QueryDone,
    QueryFailed,
    RunJob,
    RunOp,
    SendCall,
    Tick,
    ToolOp,
)

log = logging.getLogger("flowserve.gateway")
FINISHED_KEPT = 10_000  # finished queries kept for GET /v1/queries/{id}
DEFAULT_CACHE_TOKENS = 16_384

BackendFactory = Callable[[InstanceSpec, "LiveDriver"], Backend]


@dataclass(eq=False)
class _Running:
    call: LLMCall
    instance: str
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class _Control:
    fn: Callable[[float], Any]
    fut: asyncio.Future[Any]


_STOP = object()


def live_profile(spec: InstanceSpec, time_scale: float) -> InstanceProfile:
    """The core's cost model of an instance, in driver seconds: a simulated engine runs
    `time_scale` times faster than the hardware it models."""
    prof = instance_profile(spec)
    if spec.backend == "sim" and time_scale != 1.0:
        return InstanceProfile(ScaledCost(prof.cost, 1.0 / time_scale), prof.max_context, prof.kv_capacity)
    return prof


class LiveDriver:
    def __init__(self, instances: Sequence[InstanceSpec], settings: GatewaySettings,
                 backend_factory: BackendFactory | None = None,
                 output_priors: dict[tuple[str, str], float] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = s = settings
        self.clock = clock
        dispatch = make_dispatch(s.dispatch, s.dispatch_params)
        self.core = SchedulerCore(instances, dispatch, queue_factory(s.queue, s.queue_params),
                                  lambda spec: live_profile(spec, s.time_scale),
                                  OutputPredictor(output_priors), max_retries=s.redispatch_limit)
        self.metrics = GatewayMetrics(s.dispatch)
        self.metrics.attach(CoreCollector(self.core.view, self.circuit_state))
        self._factory = backend_factory or default_backend
        self.backends: dict[str, Backend] = {}
        self.breakers: dict[str, CircuitBreaker] = {}
        self.caches: dict[str, CacheEstimate] = {}
        self._specs: dict[str, InstanceSpec] = {spec.name: spec for spec in instances}
        self._removed: set[str] = set()
        self._words = WordTokenizer()
        self.tools = ToolRunner(self.tokenize, s.time_scale)
        self._ids = itertools.count(1)
        self._inbox: asyncio.Queue[Any] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running: dict[int, _Running] = {}
        self._outcomes: dict[tuple[int, str], CallOutcome] = {}
        self._meta: dict[int, QueryHandle] = {}  # call id → its query
        self._op_query: dict[int, int] = {}  # running tool op → its query id
        self._open: dict[int, QueryHandle] = {}
        self._finished: OrderedDict[int, QueryHandle] = OrderedDict()
        self._draining = False
        self._drained: asyncio.Event | None = None
        self._progress: asyncio.Event | None = None
        self._tick_timer: asyncio.TimerHandle | None = None
        self.jobs = JobRunner(settings.jobs, self.clock, self._put,
                              lambda outcome: self.metrics.jobs.labels(outcome).inc())
        self.policy_log: list[PolicyChanged] = []

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        assert self._loop_task is None, "started twice"
        self._inbox = asyncio.Queue()
        self._drained = asyncio.Event()
        self._progress = asyncio.Event()
        for spec in self._specs.values():
            self._open_instance(spec)
        self._loop_task = asyncio.create_task(self._run(), name="flowserve-driver")
        tick = getattr(self.core.dispatch, "tick_s", None)
        if tick:
            self._tick_timer = asyncio.get_running_loop().call_later(tick, self._tick, tick)

    async def shutdown(self, drain_timeout_s: float | None = None) -> None:
        """Stop taking queries, let the open ones finish (up to the timeout; the rest
        fail with that reason), then stop every task and engine connection."""
        if self._loop_task is None:
            return
        self._draining = True
        if self._progress is not None:
            self._progress.set()
        timeout = self.settings.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        if self._open:
            assert self._drained is not None
            self._drained.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), timeout)
        for h in list(self._open.values()):
            self._resolve(h, "failed", f"the gateway shut down before the query finished "
                                       f"(drain timeout {timeout:g} s)", self.clock(), None)
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        assert self._inbox is not None
        self._inbox.put_nowait(_STOP)
        await self._loop_task
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for b in self.backends.values():
            await b.aclose()
        self.jobs.shutdown()
        self._loop_task = None

    @property
    def draining(self) -> bool:
        return self._draining

    # ------------------------------------------------------------------ public API

    def new_query(self, workflow: str, program: LiveProgram, model: str | None = None,
                  tenant: str = "default", priority: int = 0, slo_s: float | None = None) -> QueryHandle:
        loop = asyncio.get_running_loop()
        return QueryHandle(next(self._ids), workflow, program, model, tenant, priority, slo_s,
                           loop.create_future(), loop.create_future())

    async def submit(self, handle: QueryHandle) -> QueryHandle:
        """Hand a query to the core; returns once it is accepted (raises `Rejected`)."""
        self._put(handle)
        await handle.accepted
        return handle

    async def run(self, workflow: str, program: LiveProgram, **kw: Any) -> QueryResult:
        h = await self.submit(self.new_query(workflow, program, **kw))
        return await h.done

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Wait until `predicate()` holds, re-checking after every item the driver
        processes (for tests, benchmarks and admin tools; raises TimeoutError)."""
        assert self._progress is not None, "the driver is not started"
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self._progress.clear()
                await self._progress.wait()

    def query(self, query_id: int) -> QueryHandle | None:
        return self._open.get(query_id) or self._finished.get(query_id)

    @property
    def open_queries(self) -> int:
        return len(self._open)

    async def add_instance(self, spec: InstanceSpec) -> None:
        """Add (or replace) an instance at run time: InstanceUp to the core."""
        def apply(now: float) -> None:
            old = self.backends.get(spec.name)
            if old is not None and self._specs.get(spec.name) != spec:
                self._spawn(old.aclose())
                del self.backends[spec.name]
            self._specs[spec.name] = spec
            self._removed.discard(spec.name)
            if spec.name not in self.backends:
                self._open_instance(spec)
            self.breakers[spec.name].record_success()
            self._feed(InstanceUp(now, spec))
        await self._control(apply)

    async def remove_instance(self, name: str) -> None:
        """Take an instance out at run time: InstanceDown; the core moves its calls."""
        def apply(now: float) -> None:
            if name not in self._specs or name in self._removed:
                raise KeyError(name)
            self._removed.add(name)
            self._feed(InstanceDown(now, name, "removed by the administrator"))
            self.caches.pop(name, None)
            backend = self.backends.pop(name, None)
            if backend is not None:
                self._spawn(backend.aclose())
        await self._control(apply)

    def instances(self) -> list[dict[str, Any]]:
        out = []
        for name, inst in self.core.instances.items():
            if name in self._removed:
                continue
            out.append({"name": name, "model": inst.spec.model, "gpu": inst.spec.gpu,
                        "backend": inst.spec.backend, "url": inst.spec.url, "up": inst.up,
                        "circuit": self.circuit_state(name), "queued": len(inst.queue),
                        "running": len(inst.running), "outstanding_s": max(inst.outstanding, 0.0),
                        "dispatched": inst.dispatched, "completed": inst.completed})
        return out

    def models(self) -> list[str]:
        return sorted({i.spec.model for n, i in self.core.instances.items() if i.up and n not in self._removed})

    def serves(self, model: str) -> bool:
        return any(i.spec.model.lower() == model.lower() for n, i in self.core.instances.items()
                   if n not in self._removed)

    def max_context(self, model: str | None) -> int | None:
        limits = [live_profile(i.spec, 1.0).max_context for i in self.core.instances.values()
                  if model is None or i.spec.model.lower() == model.lower()]
        known = [x for x in limits if x is not None]
        return min(known) if known else None

    def circuit_state(self, name: str) -> str:
        b = self.breakers.get(name)
        return b.state if b is not None else "closed"

    def predicted_queue_s(self, model: str | None) -> float | None:
        """The least outstanding predicted work over the up instances serving `model`:
        what a new call would wait at best (Hexgen's t_queue)."""
        loads = [i.outstanding for i in self.core.view.up_instances(model)]
        return max(min(loads), 0.0) if loads else None

    # ------------------------------------------------------------------ tokenization

    def tokenizers(self, model: str | None) -> list[Tokenizer]:
        """Who can tokenize for `model`: the up instances' engines (healthy circuits
        first), else the word tokenizer of simulated engines."""
        found = []
        for name, inst in self.core.instances.items():
            if inst.up and name not in self._removed and (model is None or inst.spec.model.lower() == model.lower()):
                tok = getattr(self.backends.get(name), "tokenizer", None)
                if tok is not None:
                    found.append((self.circuit_state(name) != "closed", tok))
        found.sort(key=lambda x: x[0])
        return [tok for _, tok in found] or [self._words]

    async def _ask_tokenizers(self, model: str | None, fn: Callable[[Tokenizer], Any]) -> Any:
        """The first tokenizer that answers: one engine down must not fail requests."""
        error: Exception | None = None
        for tok in self.tokenizers(model):
            try:
                return await fn(tok)
            except EngineError as e:
                if not e.retryable:
                    raise
                error = e
        assert error is not None
        raise error

    async def tokenize(self, text: str, model: str | None) -> list[int]:
        return await self._ask_tokenizers(model, lambda tok: tok.encode(text))

    async def render_chat(self, messages: Sequence[dict[str, Any]], model: str | None) -> str:
        return await self._ask_tokenizers(model, lambda tok: tok.render_chat(messages))

    # ------------------------------------------------------------------ the loop

    def _put(self, item: Any) -> None:
        assert self._inbox is not None, "the driver is not started"
        self._inbox.put_nowait(item)

    async def _control(self, fn: Callable[[float], Any]) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self._put(_Control(fn, fut))
        return await fut

    async def _run(self) -> None:
        assert self._inbox is not None
        inbox = self._inbox
        while True:
            item = await inbox.get()
            if item is _STOP:
                return
            now = self.clock()
            try:
                if isinstance(item, QueryHandle):
                    self._arrive(item, now)
                elif isinstance(item, _Control):
                    try:
                        result = item.fn(now)
                    except Exception as e:
                        item.fut.set_exception(e)
                    else:
                        item.fut.set_result(result)
                else:
                    self._feed(dataclasses.replace(item, time=now))
                    if isinstance(item, OpFinished):
                        self._op_query.pop(item.op_id, None)
            except Exception as e:  # a bug: say so loudly, end the query it hit, keep serving the others
                log.exception("driver failed on %r", item)
                h = self._query_of(item)
                if h is not None and not h.done.done():
                    self._resolve(h, "failed", f"internal error while scheduling the query: "
                                               f"{type(e).__name__}: {e}", now, None)
            assert self._progress is not None
            self._progress.set()

    def _query_of(self, item: Any) -> QueryHandle | None:
        """The open query an inbox item belongs to, if any."""
        if isinstance(item, QueryHandle):
            return item
        if isinstance(item, CallFinished | CallFailed):
            return self._meta.get(item.call_id)
        if isinstance(item, OpFinished):
            qid = self._op_query.pop(item.op_id, None)
            return None if qid is None else self._open.get(qid)
        return None

    def _arrive(self, h: QueryHandle, now: float) -> None:
        s = self.settings
        if self._draining:
            h.accepted.set_exception(Rejected(503, "the gateway is shutting down"))
        elif len(self._open) >= s.max_queries:
            self.metrics.queries.labels(h.workflow, "rejected").inc()
            h.accepted.set_exception(Rejected(429, f"{len(self._open)} queries are in flight "
                                                   f"(max_queries {s.max_queries})", 1.0))
        elif s.max_queue_s is not None and (q := self.predicted_queue_s(h.model)) is not None \
                and q > s.max_queue_s:
            self.metrics.queries.labels(h.workflow, "rejected").inc()
            h.accepted.set_exception(Rejected(
                429, f"predicted queueing of {q:.1f} s exceeds the bound of {s.max_queue_s:g} s",
                max(1.0, math.ceil(q - s.max_queue_s))))
        else:
            h.arrival = now
            deadline = None if h.slo_s is None else now + h.slo_s
            self._open[h.id] = h
            h.accepted.set_result(None)
            self._feed(QueryArrived(now, Query(h.id, now, h.workflow, h.program, deadline,  # type: ignore[arg-type]
                                               h.tenant, h.priority)))

    def _feed(self, ev: Event) -> None:
        now = ev.time
        if isinstance(ev, CallFinished):
            self._record_finish(ev)
        if isinstance(ev, CallFinished | CallFailed) and (est := self.caches.get(ev.instance)):
            est.on_end(ev.call_id)
        for cmd in self.core.handle(ev):
            self._execute(cmd, now)

    def _execute(self, cmd: Command, now: float) -> None:
        if isinstance(cmd, SendCall):
            self._send(cmd.call, cmd.instance, now)
        elif isinstance(cmd, CancelCall):
            entry = self._running.get(cmd.call_id)
            if entry is not None and entry.instance == cmd.instance:
                del self._running[cmd.call_id]
                if entry.task is not None:
                    entry.task.cancel()
                if est := self.caches.get(cmd.instance):
                    est.on_end(cmd.call_id)
        elif isinstance(cmd, RunOp):
            self._op_query[cmd.op.id] = cmd.op.query_id
            self._spawn(self._op_task(cmd.op))
        elif isinstance(cmd, QueryDone):
            h = self._open.get(cmd.query_id)
            if h is not None:
                self._resolve(h, "completed", None, now, cmd.deadline_met)
        elif isinstance(cmd, QueryFailed):
            h = self._open.get(cmd.query_id)
            if h is not None:
                self._resolve(h, "failed", cmd.reason, now, False if h.slo_s is not None else None)
        elif isinstance(cmd, PolicyChanged):
            self._policy_changed(cmd)
        elif isinstance(cmd, RunJob):
            self.jobs.run(cmd)
        else:
            raise TypeError(f"unknown command {cmd!r}")

    # ------------------------------------------------------------------ queries

    def _resolve(self, h: QueryHandle, status: str, reason: str | None, now: float,
                 met: bool | None) -> None:
        self._open.pop(h.id, None)
        for cid in h.call_ids:
            self._meta.pop(cid, None)
        latency = now - (h.arrival if h.arrival is not None else now)
        try:
            output = h.program.output() if status == "completed" else {}
        except Exception as e:  # the workflow's own summary failed: report, do not lose the query
            log.exception("workflow %s output() failed", h.workflow)
            status, reason, output = "failed", f"workflow output failed: {e}", {}
        calls = tuple(sorted(h.calls.values(), key=lambda c: c.finished))
        if not h.done.done():
            h.done.set_result(QueryResult(h.id, h.workflow, status, reason, latency, met, output, calls))
        m = self.metrics
        m.queries.labels(h.workflow, status).inc()
        if status == "completed":
            m.latency.labels(h.workflow).observe(latency)
        if h.slo_s is not None:
            m.slo.labels(h.tenant, "met" if met else "missed").inc()
        self._finished[h.id] = h
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)
        if self._draining and not self._open and self._drained is not None:
            self._drained.set()

    def _record_finish(self, ev: CallFinished) -> None:
        outcome = self._outcomes.pop((ev.call_id, ev.instance), None)
        cs = self.core.calls.get(ev.call_id)
        inst = self.core.instances.get(ev.instance)
        if cs is None or inst is None or cs.instance != ev.instance or ev.call_id not in inst.running:
            return  # stale: the call was cancelled or moved meanwhile
        h = self._meta.get(ev.call_id)
        call = cs.call
        if h is not None:
            h.calls[call.node] = CallReport(
                call.id, call.node, call.stage, ev.instance,
                outcome.prompt_tokens if outcome and outcome.prompt_tokens else call.input_tokens,
                ev.cached_tokens, ev.output_tokens, ev.text or "",
                outcome.finish_reason if outcome else "length", ev.first_token, ev.time)
        m = self.metrics
        m.prompt_tokens.labels(ev.instance).inc(call.input_tokens)
        m.cached_tokens.labels(ev.instance).inc(ev.cached_tokens)
        if ev.first_token is not None:
            m.ttft.labels(ev.instance).observe(max(ev.first_token - cs.enqueued, 0.0))

    # ------------------------------------------------------------------ calls

    def _send(self, call: LLMCall, instance: str, now: float) -> None:
        entry = _Running(call, instance)
        self._running[call.id] = entry
        h = self._open.get(call.query_id)
        if h is not None:
            self._meta[call.id] = h
            h.call_ids.add(call.id)
        m = self.metrics
        m.routing.labels(m.policy, instance).inc()
        if self.core.prefix_index is not None:
            _, per = self.core.prefix_index.match_by_instance(call.prompt)
            m.prefix_estimate.labels(instance).inc(min(per.get(instance, 0), call.input_tokens))
        est = self.caches.get(instance)
        if est is not None and self.core.prefix_index is not None:
            for ev in est.on_send(call.id, call.prompt, now):
                m.evicted.labels(instance).inc(len(ev.tokens) - ev.start)
                self._put(ev)
        entry.task = self._spawn(self._call_task(entry))

    async def _call_task(self, entry: _Running) -> None:
        call, name = entry.call, entry.instance
        backend, breaker = self.backends[name], self.breakers[name]
        sink = payload_of(call).sink
        s = self.settings
        attempt = 0
        try:
            while True:
                attempt += 1
                try:
                    out = await backend.begin(call)
                except EngineError as e:
                    now = self.clock()
                    self.metrics.engine_errors.labels(name, str(e.retryable).lower()).inc()
                    streamed = sink is not None and sink.sent > 0
                    reason = str(e) if not streamed else f"{e} (after part of the answer was streamed)"
                    opened = e.retryable and breaker.record_failure(now)
                    if not e.retryable or streamed or attempt > s.retries or breaker.state != "closed":
                        self._put(CallFailed(now, call.id, name, reason, e.retryable and not streamed))
                        if opened:
                            self._instance_failed(name, f"circuit opened: {e}")
                        return
                    self.metrics.retries.labels(name).inc()
                    await asyncio.sleep(backoff_delay(attempt, s.retry_backoff_s, s.retry_backoff_cap_s))
                    continue
                except Exception as e:  # a backend bug must still end the call, with the reason
                    log.exception("call %d on %s failed unexpectedly", call.id, name)
                    self.metrics.engine_errors.labels(name, "false").inc()
                    self._put(CallFailed(self.clock(), call.id, name, f"{type(e).__name__}: {e}", False))
                    return
                if breaker.record_success() and name not in self._removed:
                    self._put(InstanceUp(self.clock(), self._specs[name]))
                if sink is not None and sink.sent == 0 and out.text:
                    for piece in _pieces(out.text):  # an engine that did not stream
                        sink.push(piece)
                self._outcomes[(call.id, name)] = out
                self._put(CallFinished(self.clock(), call.id, name, out.output_tokens, out.cached_tokens,
                                       out.started, out.first_token, text=out.text))
                return
        finally:
            if self._running.get(call.id) is entry:
                del self._running[call.id]

    def _instance_failed(self, name: str, reason: str) -> None:
        self.metrics.trips.labels(name).inc()
        log.warning("instance %s is down: %s", name, reason)
        self._put(InstanceDown(self.clock(), name, reason))
        self._spawn(self._probe(name))

    async def _probe(self, name: str) -> None:
        """Half-open probes after the cooldown until the engine answers again."""
        breaker = self.breakers[name]
        while breaker.state == "open" and name not in self._removed:
            await asyncio.sleep(max(0.0, breaker.probe_at() - self.clock()))
            if breaker.state != "open" or name in self._removed:
                return
            breaker.begin_probe()
            backend = self.backends.get(name)
            ok = False
            if backend is not None:
                with contextlib.suppress(Exception):
                    ok = await backend.probe()
            if ok:
                breaker.record_success()
                log.warning("instance %s answers again", name)
                self._put(InstanceUp(self.clock(), self._specs[name]))
                return
            breaker.probe_failed(self.clock())

    # ------------------------------------------------------------------ ops, jobs, ticks

    async def _op_task(self, op: ToolOp) -> None:
        error, result = None, None
        try:
            result = await self.tools.run(op)
        except ToolError as e:
            error = str(e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # an executor bug still ends the op, with the reason
            log.exception("tool op %s failed", op.op)
            error = f"{type(e).__name__}: {e}"
        self._put(OpFinished(self.clock(), op.id, error, result))

    def _policy_changed(self, cmd: PolicyChanged) -> None:
        self.policy_log.append(cmd)
        log.info("policy %s changed parameters: %s", cmd.policy, dict(cmd.params))
        self.metrics.policy_changes.labels(cmd.policy).inc()
        for key, value in cmd.params.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.metrics.policy_param.labels(cmd.policy, key).set(float(value))

    def _tick(self, every: float) -> None:
        self._put(Tick(self.clock()))
        self._tick_timer = asyncio.get_running_loop().call_later(every, self._tick, every)

    # ------------------------------------------------------------------ instances

    def _open_instance(self, spec: InstanceSpec) -> None:
        s = self.settings
        self.backends[spec.name] = self._factory(spec, self)
        self.breakers.setdefault(spec.name, CircuitBreaker(s.breaker_failures, s.breaker_cooldown_s,
                                                            s.breaker_max_cooldown_s))
        if spec.backend != "sim" and self.core.prefix_index is not None:
            size = s.cache_tokens.get(spec.name) or kv_capacity(spec)
            seqs = s.cache_sequences.get(spec.name) or (spec.profile.slots if spec.profile is not None else None)
            self.caches[spec.name] = CacheEstimate(spec.name, size or DEFAULT_CACHE_TOKENS, seqs)

    def emit(self, ev: Event) -> None:
        """For backends: an engine-side event (capacity, eviction) for the core."""
        self._put(ev)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _pieces(text: str) -> list[str]:
    """Split a whole answer into word-sized deltas (with their leading spaces)."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i] == " " and text[i - 1] != " ":
            out.append(text[start:i])
            start = i
    out.append(text[start:])
    return out


def default_backend(spec: InstanceSpec, driver: LiveDriver) -> Backend:
    s = driver.settings
    if spec.backend == "sim":
        return SimBackend(spec, roofline_for(spec), kv_capacity(spec), s.time_scale, driver.emit,
                          driver.clock, report_evictions=driver.core.prefix_index is not None)
    from flowserve.engines.openai_backend import OpenAIBackend

    return OpenAIBackend(spec, s)


__all__ = ["CallReport", "LiveDriver", "QueryHandle", "QueryResult", "Rejected"]
