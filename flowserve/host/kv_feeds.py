"""The gateway's subscriptions to its engines' KV-cache events: one `EngineSubscriber` per
instance whose engine publishes them (`kv_events:` with an endpoint), opened and closed
with the instance. Each subscriber feeds the driver's inbox, so the events reach the core
like any other; each gateway replica subscribes on its own (no broker, as llm-d's precise
scorer does). Simulated instances publish their events themselves (`SimBackend`). An
engine without events is read on `/slots` instead, where it serves it (`slots_feed`).
The feeds listen to the host's facts: an instance opened, an instance closed."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from flowserve.core.scheduler import SchedulerCore
from flowserve.engines.openai_backend import OpenAIBackend
from flowserve.host.facts import InstanceClosed, InstanceOpened
from flowserve.host.metrics import GatewayMetrics
from flowserve.host.routing_tokens import GatewayTokens
from flowserve.host.slots_feed import SlotsReader
from flowserve.host.token_check import check_tokenization
from flowserve.kvevents.subscriber import EngineSubscriber
from flowserve.types.kv import SlotsResident


class KVFeeds:
    def __init__(self, put: Callable[[Any], None], clock: Callable[[], float], room: Callable[[], Awaitable[None]],
                 metrics: GatewayMetrics, core: SchedulerCore, tokens: GatewayTokens,
                 resident: Callable[[SlotsResident], None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], Any], slots_poll_s: float = 0.0) -> None:
        """room: returns once the driver took what it was given (subscribers read on then);
        tokens: the gateway's tokenizers, checked against each engine's (`token_check`);
        resident: where a `/slots` read goes (the host's estimates); spawn: runs a
        closing feed's shutdown; slots_poll_s: how often an engine without events is read
        on `/slots` (0: never)."""
        self._put = put
        self._clock = clock
        self._room = room
        self._bad = metrics.kv_bad
        self._tokens = tokens
        self._core = core
        self._resident = resident
        self._spawn = spawn
        self._slots_poll_s = slots_poll_s
        metrics.attach(KVCollector(core))
        self.subscribers: dict[str, EngineSubscriber] = {}
        self.slots: dict[str, SlotsReader] = {}
        self.token_checks: dict[str, str] = {}  # instance → the start-up check's verdict
        self._checks: dict[str, asyncio.Task[None]] = {}

    def opened(self, fact: InstanceOpened) -> None:
        spec, backend = fact.spec, fact.backend
        kv = spec.kv_events
        if kv is None and isinstance(backend, OpenAIBackend) and self._slots_poll_s > 0 \
                and self._core.keeps_prefix_index:
            model = spec.model
            reader = SlotsReader(spec.name, backend, lambda text: self._tokens.text(text, model), self._resident,
                                 self._clock, self._slots_poll_s)
            self.slots[spec.name] = reader
            reader.start()
        if kv is None or not kv.endpoint or spec.backend == "sim":
            return
        sub = EngineSubscriber(spec.name, kv, self._put, self._clock, self._room,
                               lambda inst, kind: self._bad.labels(inst, kind).inc())
        self.subscribers[spec.name] = sub
        sub.start()
        if isinstance(backend, OpenAIBackend):
            self.token_checks[spec.name] = "not checked yet (the engine has not answered)"
            self._checks[spec.name] = asyncio.create_task(self._check(spec.name, backend))

    async def _check(self, name: str, backend: OpenAIBackend) -> None:
        self.token_checks[name] = await check_tokenization(name, backend, self._tokens)

    def closed(self, fact: InstanceClosed) -> None:
        # taken off at once: an instance replaced by another spec reopens under its name right after
        self._spawn(self._shut(*self._take(fact.name)))

    async def close(self, name: str) -> None:
        await self._shut(*self._take(name))

    def _take(self, name: str) -> tuple[asyncio.Task[None] | None, SlotsReader | None, EngineSubscriber | None]:
        return self._checks.pop(name, None), self.slots.pop(name, None), self.subscribers.pop(name, None)

    @staticmethod
    async def _shut(check: asyncio.Task[None] | None, reader: SlotsReader | None,
                    sub: EngineSubscriber | None) -> None:
        if check is not None:
            check.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await check
        if reader is not None:
            await reader.aclose()
        if sub is not None:
            await sub.aclose()

    async def aclose(self) -> None:
        for name in {*self.subscribers, *self.slots}:
            await self.close(name)


class KVCollector:
    """The engines' cache views and the block index, read from the core when scraped."""

    def __init__(self, core: SchedulerCore) -> None:
        self._core = core

    def collect(self) -> Iterator[Metric]:
        views = self._core.kv_views()
        if not views:
            return
        precise = GaugeMetricFamily("flowserve_kv_view_precise", "1 if the instance's prefix view is its engine's "
                                    "cache events, 0 if it fell back to the estimate", labels=["instance"])
        blocks = GaugeMetricFamily("flowserve_kv_index_blocks", "Blocks the engine's events say it holds",
                                   labels=["instance"])
        slots = CounterMetricFamily("flowserve_kv_slot_prompts", "Prompts an engine's /slots said it holds, "
                                    "topping up the estimate", labels=["instance"])
        for v in views:
            precise.add_metric([v.instance], 1.0 if v.precise else 0.0)
            blocks.add_metric([v.instance], v.blocks)
            if v.slot_prompts is not None:
                slots.add_metric([v.instance], v.slot_prompts)
        yield from (precise, blocks, slots)
        index = self._core.kv_index()
        if index is not None:
            size, stats = index
            yield GaugeMetricFamily("flowserve_kv_index_bytes", "Estimated bytes of the block index (bounded by "
                                    "its budget)", value=size)
            counts = CounterMetricFamily("flowserve_kv_index", "Block index counters", labels=["what"])
            for what, n in dataclasses.asdict(stats).items():
                counts.add_metric([what], n)
            yield counts
