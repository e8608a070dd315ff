"""`backend: sim` in live mode: the simulator's engine model advanced in real time.

The very `SimEngine` the simulator uses runs on a virtual clock tied to the driver's:
virtual = (now − origin) × time_scale, so with time_scale 10 a call the model predicts
at 2 s finishes after 0.2 s. Before anything happens at virtual time v the engine is
first advanced through every wake-up ≤ v (as the discrete-event loop would), and a
timer wakes it at its next completion. Like in the simulator it reports what it can
start (`InstanceCapacity`) after every change and, when the router keeps a prefix index,
its real evictions (`PrefixEvicted`) — or, with `kv_events: {}`, its KV-cache events as
vLLM publishes them. Answers are placeholder text of the simulated output length.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from flowserve.engines.backend import CallOutcome, Emit, EngineError, EngineRequest
from flowserve.profiles.cost_model import CostModel
from flowserve.sim.kv_views import PublishingEngine, viewed_engine
from flowserve.sim.sequence import Capacity
from flowserve.types.events import CallFailed, CallFinished, InstanceCapacity, PrefillDone, PrefixEvicted
from flowserve.types.kv import KVCacheEvents, KVViewChanged
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

WAKE_SLACK = 1e-6  # virtual seconds: a timer that fires a hair early still advances


def placeholder_text(call_id: int, tokens: int) -> str:
    """Deterministic filler of `tokens` words for a simulated answer."""
    words = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")
    return " ".join(words[(call_id + i) % len(words)] for i in range(tokens))


class SimBackend:
    def __init__(self, spec: InstanceSpec, cost: CostModel, kv_capacity: int, time_scale: float,
                 emit: Emit, clock: Callable[[], float], report_evictions: bool,
                 report_prefill: bool = False) -> None:
        assert time_scale > 0
        self.spec = spec
        self.tokenizer = None  # the gateway's word tokenizer stands for a simulated engine's
        self.engine = viewed_engine(spec, cost, kv_capacity, report_evictions, report_prefill=report_prefill)
        self.scale = time_scale
        self._emit = emit
        self._clock = clock
        self._origin = clock()
        self._futures: dict[int, asyncio.Future[CallOutcome]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._reported: Capacity | None = None
        self._closed = False
        if isinstance(self.engine, PublishingEngine):  # `kv_events: {}`: its first batch, before any call
            for ev in self.engine.announce(0.0):
                emit(dataclasses.replace(ev, time=clock()))

    # ------------------------------------------------------------------ clocks

    def _virtual(self, t: float) -> float:
        return (t - self._origin) * self.scale

    def _real(self, v: float | None) -> float | None:
        return None if v is None else self._origin + v / self.scale

    # ------------------------------------------------------------------ Backend

    def begin(self, call: LLMCall, req: EngineRequest) -> asyncio.Future[CallOutcome]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[CallOutcome] = loop.create_future()
        if self._closed:
            fut.set_exception(EngineError(f"{self.spec.name} is closed", retryable=True))
            return fut
        v = self._catch_up()
        self._futures[call.id] = fut
        fut.add_done_callback(lambda f, cid=call.id: self._on_done(cid, f))
        # a simulated engine has no end-of-sequence: it answers with the requested length
        self._apply(self.engine.submit(call, v, req.max_tokens))
        self._settle()
        return fut

    async def probe(self) -> bool:
        return not self._closed

    async def aclose(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for fut in list(self._futures.values()):
            if not fut.done():
                fut.set_exception(EngineError(f"{self.spec.name} was closed", retryable=True))

    # ------------------------------------------------------------------ engine

    def _on_done(self, call_id: int, fut: asyncio.Future[CallOutcome]) -> None:
        if self._futures.get(call_id) is fut:
            del self._futures[call_id]
        if fut.cancelled() and not self._closed:
            v = self._catch_up()
            self.engine.abort(call_id, v)
            self._settle()

    def _catch_up(self) -> float:
        """Advance through every wake-up up to now; returns now in virtual time."""
        v = self._virtual(self._clock())
        while (wake := self.engine.wake) is not None and wake <= v + WAKE_SLACK:
            self._apply(self.engine.advance(wake))
        return max(v, 0.0)

    def _apply(self, events: list[CallFinished | CallFailed | PrefixEvicted | PrefillDone | KVCacheEvents
                                  | KVViewChanged]) -> None:
        for ev in events:
            if isinstance(ev, KVCacheEvents | KVViewChanged):  # published as an engine's, decoded as one
                self._emit(dataclasses.replace(ev, time=self._clock()))
                continue
            if isinstance(ev, PrefixEvicted):
                self._emit(PrefixEvicted(self._clock(), ev.instance, ev.tokens, ev.start))
                continue
            if isinstance(ev, PrefillDone):
                self._emit(PrefillDone(self._clock(), ev.call_id, ev.instance))
                continue
            fut = self._futures.pop(ev.call_id, None)
            if fut is None or fut.done():
                continue
            if isinstance(ev, CallFailed):
                fut.set_exception(EngineError(ev.reason, retryable=ev.retryable, kind=ev.kind))
            else:
                fut.set_result(CallOutcome(
                    output_tokens=ev.output_tokens, cached_tokens=ev.cached_tokens,
                    text=placeholder_text(ev.call_id, ev.output_tokens),
                    started=self._real(ev.started), first_token=self._real(ev.first_token)))

    def _settle(self) -> None:
        """Re-arm the wake-up timer and report capacity if it changed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        wake = self.engine.wake
        if wake is not None and not self._closed:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(self._loop_time(self._real(wake)), self._on_timer)
        cap = self.engine.capacity()
        if cap != self._reported:
            self._reported = cap
            self._emit(InstanceCapacity(self._clock(), self.spec.name, cap.free_seqs,
                                        cap.headroom_tokens, cap.kv_free_tokens))

    def _loop_time(self, t: float | None) -> float:
        """Driver clock → event-loop clock (both monotonic, possibly different origins)."""
        assert t is not None
        loop = asyncio.get_running_loop()
        return loop.time() + (t - self._clock())

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        self._catch_up()
        self._settle()
