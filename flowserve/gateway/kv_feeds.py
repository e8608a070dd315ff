"""The gateway's subscriptions to its engines' KV-cache events: one `EngineSubscriber` per
instance whose engine publishes them (`kv_events:` with an endpoint), opened and closed
with the instance. Each subscriber feeds the driver's inbox, so the events reach the core
like any other; each gateway replica subscribes on its own (no broker, as llm-d's precise
scorer does). Simulated instances publish their events themselves (`SimBackend`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from flowserve.core.scheduler import SchedulerCore
from flowserve.gateway.metrics import GatewayMetrics
from flowserve.kvevents.subscriber import EngineSubscriber
from flowserve.types.specs import InstanceSpec


class KVFeeds:
    def __init__(self, put: Callable[[Any], None], clock: Callable[[], float], room: Callable[[], Awaitable[None]],
                 metrics: GatewayMetrics, core: SchedulerCore) -> None:
        """room: returns once the driver took what it was given (subscribers read on then)."""
        self._put = put
        self._clock = clock
        self._room = room
        self._bad = metrics.kv_bad
        metrics.attach(KVCollector(core))
        self.subscribers: dict[str, EngineSubscriber] = {}

    def open(self, spec: InstanceSpec) -> None:
        kv = spec.kv_events
        if kv is None or not kv.endpoint or spec.backend == "sim":
            return
        sub = EngineSubscriber(spec.name, kv, self._put, self._clock, self._room,
                               lambda inst, kind: self._bad.labels(inst, kind).inc())
        self.subscribers[spec.name] = sub
        sub.start()

    async def close(self, name: str) -> None:
        sub = self.subscribers.pop(name, None)
        if sub is not None:
            await sub.aclose()

    async def aclose(self) -> None:
        for name in list(self.subscribers):
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
        for v in views:
            precise.add_metric([v.instance], 1.0 if v.precise else 0.0)
            blocks.add_metric([v.instance], v.blocks)
        yield from (precise, blocks)
        index = self._core.kv_index()
        if index is not None:
            size, stats = index
            yield GaugeMetricFamily("flowserve_kv_index_bytes", "Estimated bytes of the block index (bounded by "
                                    "its budget)", value=size)
            counts = CounterMetricFamily("flowserve_kv_index", "Block index counters", labels=["what"])
            for what in ("stored", "removed", "orphans", "unknown_removals", "evicted", "expired", "confirmed"):
                counts.add_metric([what], getattr(stats, what))
            yield counts
