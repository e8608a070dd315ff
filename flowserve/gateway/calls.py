"""Running the core's `SendCall`s on engines: retries, circuit breakers and probes.

Each call runs as a task on its instance's backend. A retryable engine error is retried
on the same instance with back-off while its circuit stays closed; on final failure the
task reports `CallFailed` and the core re-dispatches (nothing here chooses an
instance). `breaker_failures` errors in a row open the circuit: the instance is reported
down (`InstanceDown`, the core moves its calls), and half-open probes after the cooldown
bring it back (`InstanceUp`). A call whose stream already sent text is never retried: it
fails with the reason. For engines the router cannot observe, an LRU estimate of each
engine's cache reports evictions to the core (`PrefixEvicted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowserve.engines.backend import Backend, EngineError, EngineRequest
from flowserve.engines.cache_estimate import CacheEstimate, estimated_sequences
from flowserve.errors import FailureKind
from flowserve.gateway.breaker import CircuitBreaker, backoff_delay
from flowserve.gateway.metrics import GatewayMetrics
from flowserve.gateway.parts import PartSink
from flowserve.gateway.query import CallHandle, QueryHandle
from flowserve.gateway.settings import GatewaySettings
from flowserve.profiles.instance import kv_capacity
from flowserve.types.events import CallFailed, CallFinished, Event, InstanceDown, InstanceUp
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

if TYPE_CHECKING:
    from flowserve.core.scheduler import SchedulerCore
    from flowserve.gateway.kv_feeds import KVFeeds

log = logging.getLogger("flowserve.gateway")
DEFAULT_CACHE_TOKENS = 16_384
FIRST_PROBE_MARGIN_S = 5.0  # beyond the connect timeout: the engine's /props and /health answers


@dataclass(eq=False)
class _Running:
    call: LLMCall
    instance: str
    sent: float
    task: asyncio.Task[None] | None = None
    channel: QueryHandle | CallHandle | None = None  # whose client gets the answer (the engine's own fields)


class CallRunner:
    def __init__(self, settings: GatewaySettings, core: SchedulerCore, metrics: GatewayMetrics,
                 clock: Callable[[], float], put: Callable[[Any], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 make_backend: Callable[[InstanceSpec], Backend]) -> None:
        self.settings = settings
        self._core = core
        self._metrics = metrics
        self._clock = clock
        self._put = put
        self._spawn = spawn
        self._make_backend = make_backend
        self.specs: dict[str, InstanceSpec] = {}
        self.removed: set[str] = set()
        self.backends: dict[str, Backend] = {}
        self.breakers: dict[str, CircuitBreaker] = {}
        self.caches: dict[str, CacheEstimate] = {}
        self.kv: KVFeeds | None = None  # the engines' cache events (set by the driver)
        self._running: dict[int, _Running] = {}
        self.on_send: Callable[[str, LLMCall], None] | None = None  # a replica shares what it routed

    # ------------------------------------------------------------------ instances

    def open_instance(self, spec: InstanceSpec) -> None:
        s = self.settings
        self.specs[spec.name] = spec
        self.removed.discard(spec.name)
        self.backends[spec.name] = self._make_backend(spec)
        self.breakers.setdefault(spec.name, CircuitBreaker(s.breaker_failures, s.breaker_cooldown_s,
                                                            s.breaker_max_cooldown_s))
        if spec.backend != "sim" and self._core.keeps_prefix_index:
            size = s.cache_tokens.get(spec.name) or kv_capacity(spec)
            seqs = estimated_sequences(spec, s.cache_sequences.get(spec.name))
            self.caches[spec.name] = CacheEstimate(spec.name, size or DEFAULT_CACHE_TOKENS, seqs)
        if self.kv is not None:
            self.kv.open(spec, self.backends[spec.name], self.caches.get(spec.name))

    def add(self, spec: InstanceSpec) -> InstanceSpec:
        """Open (or replace) an instance's backend; its circuit starts closed."""
        if spec.name in self.backends and self.specs.get(spec.name) != spec:
            self.close_instance(spec.name)
        if spec.name not in self.backends:
            self.open_instance(spec)
        self.removed.discard(spec.name)
        self.breakers[spec.name].record_success()
        return spec

    def check_removable(self, name: str) -> None:
        if name not in self.specs or name in self.removed:
            raise KeyError(name)

    def remove(self, name: str) -> None:
        self.removed.add(name)
        self.close_instance(name)

    def close_instance(self, name: str) -> None:
        self.caches.pop(name, None)
        if self.kv is not None:
            self._spawn(self.kv.close(name))
        backend = self.backends.pop(name, None)
        if backend is not None:
            self._spawn(backend.aclose())

    def circuit_state(self, name: str) -> str:
        b = self.breakers.get(name)
        return b.state if b is not None else "closed"

    async def aclose(self) -> None:
        if self.kv is not None:
            await self.kv.aclose()
        for b in self.backends.values():
            await b.aclose()

    # ------------------------------------------------------------------ calls

    def send(self, call: LLMCall, instance: str, handle: QueryHandle | None, now: float) -> None:
        entry = _Running(call, instance, now)
        self._running[call.id] = entry
        if self.on_send is not None:
            self.on_send(instance, call)
        m = self._metrics
        m.routing.labels(m.policy, instance).inc()
        if self._core.keeps_prefix_index:
            m.prefix_estimate.labels(instance).inc(self._core.prefix_hit(call.prompt, instance))
        est = self.caches.get(instance)
        if est is not None:
            for ev in est.on_send(call.id, call.prompt, now):
                m.evicted.labels(instance).inc(len(ev.tokens) - ev.start)
                self._put(ev)
        max_tokens, exact = call.max_tokens, False
        if handle is not None and handle.oracle is not None:
            recorded = handle.oracle.output_tokens(call.node)
            if recorded is not None:  # a replay: produce exactly the recorded length
                max_tokens, exact = max(1, recorded), True
        entry.channel = handle.channel(call.node) if handle is not None else None
        sink = entry.channel.sink if entry.channel is not None else None
        if call.streams_parts:  # decode pipelining: each complete line goes to the core at once
            sink = PartSink(call.id, instance, self._clock, self._put, sink)
        req = EngineRequest(max_tokens, exact, sink)
        entry.task = self._spawn(self._run(entry, req))

    def cancel(self, call_id: int, instance: str) -> None:
        entry = self._running.get(call_id)
        if entry is not None and entry.instance == instance:
            del self._running[call_id]
            if entry.task is not None:
                entry.task.cancel()
            if est := self.caches.get(instance):
                est.on_end(call_id)

    def on_end(self, ev: CallFinished | CallFailed) -> None:
        """Before the core sees a call's end: the cache estimate and the call metrics."""
        if est := self.caches.get(ev.instance):
            est.on_end(ev.call_id)
        if isinstance(ev, CallFinished) and self._core.is_current(ev.call_id, ev.instance):
            m = self._metrics
            m.prompt_tokens.labels(ev.instance).inc(ev.prompt_tokens)
            m.cached_tokens.labels(ev.instance).inc(ev.cached_tokens)

    async def _run(self, entry: _Running, req: EngineRequest) -> None:
        call, name = entry.call, entry.instance
        backend, breaker = self.backends[name], self.breakers[name]
        sink = req.sink
        s = self.settings
        attempt = 0
        try:
            while True:
                attempt += 1
                try:
                    out = await backend.begin(call, req)
                except EngineError as e:
                    now = self._clock()
                    self._metrics.engine_errors.labels(name, str(e.retryable).lower()).inc()
                    streamed = sink is not None and sink.sent > 0
                    reason = str(e) if not streamed else f"{e} (after part of the answer was streamed)"
                    opened = e.retryable and breaker.record_failure(now)
                    if not e.retryable or streamed or attempt > s.retries or breaker.state != "closed":
                        self._put(CallFailed(now, call.id, name, reason, e.retryable and not streamed, e.kind))
                        if opened:
                            self._instance_failed(name, f"circuit opened: {e}")
                        return
                    self._metrics.retries.labels(name).inc()
                    await asyncio.sleep(backoff_delay(attempt, s.retry_backoff_s, s.retry_backoff_cap_s))
                    continue
                except Exception as e:  # a backend bug must still end the call, with the reason
                    log.exception("call %d on %s failed unexpectedly", call.id, name)
                    self._metrics.engine_errors.labels(name, "false").inc()
                    self._put(CallFailed(self._clock(), call.id, name, f"{type(e).__name__}: {e}", False,
                                        FailureKind.INTERNAL))
                    return
                if breaker.record_success() and name not in self.removed:
                    self._put(InstanceUp(self._clock(), self.specs[name]))
                if out.first_token is not None:
                    self._metrics.ttft.labels(name).observe(max(out.first_token - entry.sent, 0.0))
                if entry.channel is not None and out.own:
                    entry.channel.engine = out.own
                if sink is not None and sink.sent == 0 and out.text:
                    for piece in _pieces(out.text):  # an engine that did not stream
                        sink.push(piece)
                self._put(CallFinished(self._clock(), call.id, name, out.output_tokens, out.cached_tokens,
                                       out.started, out.first_token, text=out.text,
                                       finish_reason=out.finish_reason,
                                       prompt_tokens=out.prompt_tokens or call.input_tokens, extra=out.extra))
                return
        finally:
            if self._running.get(call.id) is entry:
                del self._running[call.id]

    def _instance_failed(self, name: str, reason: str) -> None:
        self._metrics.trips.labels(name).inc()
        log.warning("instance %s is down: %s", name, reason)
        self._put(InstanceDown(self._clock(), name, reason))
        self._spawn(self._probe(name))

    async def first_probe(self, name: str) -> InstanceDown | None:
        """An engine joins the routing (and tokenizes) only once it answered: None if it
        does; else its circuit opens, half-open probes continue, and the InstanceDown
        for the core is returned."""
        try:
            async with asyncio.timeout(self.settings.connect_timeout_s + FIRST_PROBE_MARGIN_S):
                if await self.backends[name].probe():
                    return None
        except Exception as e:  # unreachable, slow, or a backend bug: not in the routing yet
            log.debug("first probe of %s failed", name, exc_info=e)
        now = self._clock()
        self.breakers[name].trip(now)
        self._metrics.trips.labels(name).inc()
        log.warning("instance %s does not answer; it joins the routing when it does", name)
        self._spawn(self._probe(name))
        return InstanceDown(now, name, "the engine has not answered yet")

    async def _probe(self, name: str) -> None:
        """Half-open probes after the cooldown until the engine answers again."""
        breaker = self.breakers[name]
        while breaker.state == "open" and name not in self.removed:
            await asyncio.sleep(max(0.0, breaker.probe_at() - self._clock()))
            if breaker.state != "open" or name in self.removed:
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
                self._put(InstanceUp(self._clock(), self.specs[name]))
                return
            breaker.probe_failed(self._clock())

    def emit(self, ev: Event) -> None:
        """For backends: an engine-side event (capacity, eviction) for the core."""
        self._put(ev)


def _pieces(text: str) -> list[str]:
    """Split a whole answer into word-sized deltas (with their leading spaces)."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i] == " " and text[i - 1] != " ":
            out.append(text[start:i])
            start = i
    out.append(text[start:])
    return out
