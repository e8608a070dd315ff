"""Running the core's `SendCall`s on engines: retries, circuit breakers and probes.

Each call runs as a task on its instance's backend. A retryable engine error is retried
on the same instance with back-off while its circuit stays closed; on final failure the
task reports `CallFailed` and the core re-dispatches (nothing here chooses an
instance). `breaker_failures` errors in a row open the circuit: the instance is reported
down (`InstanceDown`, the core moves its calls), and half-open probes after the cooldown
bring it back (`InstanceUp`). A call whose answer is committed — its client saw text, or
the proxy took it (`TokenSink.committed`) — is never retried: it fails with the reason.
Opening and closing an instance's backend are facts (`InstanceOpened`, `InstanceClosed`)
for the host's listeners (the cache estimate, the KV feeds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from flowserve.engines.backend import Backend, EngineError, EngineRequest
from flowserve.errors import FailureKind
from flowserve.host.breaker import CircuitBreaker, backoff_delay
from flowserve.host.facts import Fact, InstanceClosed, InstanceOpened
from flowserve.host.live_calls import LiveCall, LiveCalls
from flowserve.host.metrics import GatewayMetrics
from flowserve.host.parts import PartSink
from flowserve.host.settings import GatewaySettings
from flowserve.tokenize.chat import ChatTokenizer
from flowserve.types.events import CallFailed, CallFinished, InstanceDown, InstanceUp
from flowserve.types.specs import InstanceSpec

log = logging.getLogger("flowserve.gateway")
FIRST_PROBE_MARGIN_S = 5.0  # beyond the connect timeout: the engine's /props and /health answers


class CallRunner:
    def __init__(self, settings: GatewaySettings, calls: LiveCalls, metrics: GatewayMetrics,
                 clock: Callable[[], float], put: Callable[[Any], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 make_backend: Callable[[InstanceSpec], Backend], publish: Callable[[Fact], None]) -> None:
        """calls: the host's live calls (each attempt runs on its record); publish: the
        host's listeners (`flowserve.host.facts`)."""
        self.settings = settings
        self._calls = calls
        self._metrics = metrics
        self._clock = clock
        self._put = put
        self._spawn = spawn
        self._make_backend = make_backend
        self._publish = publish
        self.specs: dict[str, InstanceSpec] = {}
        self.removed: set[str] = set()
        self.backends: dict[str, Backend] = {}
        self.breakers: dict[str, CircuitBreaker] = {}

    # ------------------------------------------------------------------ instances

    def open_instance(self, spec: InstanceSpec) -> None:
        s = self.settings
        self.specs[spec.name] = spec
        self.removed.discard(spec.name)
        self.backends[spec.name] = self._make_backend(spec)
        self.breakers.setdefault(spec.name, CircuitBreaker(s.breaker_failures, s.breaker_cooldown_s,
                                                            s.breaker_max_cooldown_s))
        self._publish(InstanceOpened(self._clock(), spec, self.backends[spec.name]))

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
        self._publish(InstanceClosed(self._clock(), name))
        backend = self.backends.pop(name, None)
        if backend is not None:
            self._spawn(backend.aclose())

    def tokenizer(self, instance: str) -> ChatTokenizer | None:
        """The instance's engine tokenizer (None: a simulated engine, or none open)."""
        backend = self.backends.get(instance)
        return None if backend is None else backend.tokenizer

    def circuit_state(self, name: str) -> str:
        b = self.breakers.get(name)
        return b.state if b is not None else "closed"

    async def aclose(self) -> None:
        for b in self.backends.values():
            await b.aclose()

    # ------------------------------------------------------------------ calls

    def send(self, lc: LiveCall) -> None:
        """Run the call's current attempt (`LiveCall.attempt`) on its instance."""
        call, channel = lc.call, lc.channel
        assert call is not None and lc.instance is not None
        max_tokens, exact = call.max_tokens, False
        query = lc.query
        if query is not None and query.oracle is not None:
            recorded = query.oracle.output_tokens(call.node)
            if recorded is not None:  # a replay: produce exactly the recorded length
                max_tokens, exact = max(1, recorded), True
        sink = channel.sink if channel is not None else None
        if call.streams_parts:  # decode pipelining: each complete line goes to the core at once
            sink = PartSink(call.id, lc.instance, self._clock, self._put, sink)
        lc.run(self._spawn(self._run(lc, EngineRequest(max_tokens, exact, sink))))

    def cancel(self, call_id: int, instance: str) -> bool:
        """The core cancelled the call: its request on `instance` is aborted (whether one ran)."""
        lc = self._calls.get(call_id)
        if lc is None or not lc.runs_on(instance):
            return False
        self._calls.ended(lc)
        return True

    async def _run(self, lc: LiveCall, req: EngineRequest) -> None:
        call, name, channel, sent = lc.call, lc.instance, lc.channel, lc.sent
        assert call is not None and name is not None
        task = asyncio.current_task()
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
                    final = sink.committed_how if sink is not None and sink.committed else None
                    streamed = final is not None
                    reason = str(e) if final is None else f"{e} ({final})"
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
                if out.failed_over is not None:  # its engine failed, the proxy's retry answered
                    self._metrics.engine_errors.labels(name, "true").inc()
                    if breaker.record_failure(self._clock()):
                        self._instance_failed(name, f"circuit opened: the proxy retried its calls on "
                                                    f"{out.failed_over}")
                elif breaker.record_success() and name not in self.removed:
                    self._put(InstanceUp(self._clock(), self.specs[name]))
                if out.first_token is not None:
                    self._metrics.ttft.labels(name).observe(max(out.first_token - sent, 0.0))
                if channel is not None and out.own:
                    channel.answered_by(out.own)
                if sink is not None and sink.sent == 0 and out.text:
                    for piece in _pieces(out.text):  # an engine that did not stream
                        sink.push(piece)
                self._put(CallFinished(self._clock(), call.id, name, out.output_tokens, out.cached_tokens,
                                       out.started, out.first_token, text=out.text,
                                       finish_reason=out.finish_reason,
                                       prompt_tokens=out.prompt_tokens or call.input_tokens, extra=out.extra))
                return
        finally:
            self._calls.ended(lc, task)

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


def _pieces(text: str) -> list[str]:
    """Split a whole answer into word-sized deltas (with their leading spaces)."""
    out, start = [], 0
    for i in range(1, len(text)):
        if text[i] == " " and text[i - 1] != " ":
            out.append(text[start:i])
            start = i
    out.append(text[start:])
    return out
