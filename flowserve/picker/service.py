"""The endpoint picker's gRPC services on the gateway's scheduler core: Envoy's
`ExternalProcessor` (one `ProxyExchange` per stream) and gRPC health.

`PickerCore` is the live host without the HTTP face: the same `LiveHost` — the live
driver, its scheduler core, programs, tenants, admission and metrics — whose engine
backends hand calls to the proxy (`PickerBackend`), and the same request intake. Health, as GIE's pickers
report it: `liveness` serves while the process runs; `readiness`, the ext_proc service
and the overall status serve while an instance is up and the picker is not draining.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from prometheus_client import Counter, Histogram

from flowserve.errors import ConfigError
from flowserve.host.backends import BackendContext
from flowserve.host.intake.intake import RequestIntake
from flowserve.host.metrics import LATENCY_BUCKETS
from flowserve.host.root import LiveHost
from flowserve.host.settings import ServeConfig
from flowserve.picker import wire
from flowserve.picker.exchange import ProxyExchange
from flowserve.picker.pick import PickerBackend
from flowserve.types.specs import InstanceSpec

log = logging.getLogger("flowserve.picker")
EXT_PROC = "envoy.service.ext_proc.v3.ExternalProcessor"
HEALTH_SERVICES = ("", "liveness", "readiness", EXT_PROC)
HEALTH_EVERY_S = 0.5
FALLBACKS = 2  # endpoints after the pick in x-gateway-destination-endpoint (the proxy retries once)


def picker_config(config: ServeConfig) -> ServeConfig:
    """The serving config as the picker runs it: every LLM instance must be an engine the
    proxy can reach (`backend: openai` with a `url`); workflows are the gateway's alone."""
    for spec in config.instances:
        if spec.kind == "llm" and (spec.backend != "openai" or not spec.url):
            raise ConfigError(f"instance {spec.name!r}: the endpoint picker routes to engines by address; "
                              f"give it `backend: openai` and the engine's `url:` (simulated engines are served "
                              f"by `flowserve serve`)")
    if not config.gateway.workflows:
        return config
    return dataclasses.replace(config, gateway=config.gateway.model_copy(update={"workflows": {}}))


def picker_backend(spec: InstanceSpec, host: BackendContext) -> PickerBackend:
    return PickerBackend(spec, host.settings)


class PickerCore:
    """What every `ProxyExchange` shares: the live host and its request intake, and metrics."""

    def __init__(self, config: ServeConfig) -> None:
        self.host = LiveHost(picker_config(config), picker_backend, workflows={})
        self.driver = self.host.driver
        self.intake = RequestIntake(self.host)
        self.clock = self.driver.clock
        self.max_body_bytes = config.gateway.max_body_bytes
        r = self.driver.metrics.registry
        self._requests = Counter("flowserve_epp_requests", "Requests the endpoint picker saw, by outcome (routed, "
                                 "refused, failed; retried: answered by a fallback after the picked engine failed)",
                                 ["outcome"], registry=r)
        self._held = Histogram("flowserve_epp_held_seconds", "How long a request waited in the core before its "
                               "pick", buckets=LATENCY_BUCKETS, registry=r)
        self._picks = Counter("flowserve_epp_picks", "Picks by instance", ["instance"], registry=r)
        self._routed = self._requests.labels("routed")
        self._picks_by: dict[str, Any] = {}

    async def start(self) -> None:
        await self.host.start()

    async def stop(self) -> None:
        await self.host.stop()

    def count(self, outcome: str) -> None:
        self._requests.labels(outcome).inc()

    def routed(self, instance: str, held_s: float) -> None:
        picks = self._picks_by.get(instance)
        if picks is None:  # a label lookup per request costs more than the count
            picks = self._picks_by[instance] = self._picks.labels(instance)
        self._routed.inc()
        picks.inc()
        self._held.observe(held_s)

    def fallbacks(self, instance: str) -> list[tuple[str, str]]:
        """Where the proxy retries a call whose engine failed before answering: the other
        instances up that serve its model, least outstanding work first, as (name,
        endpoint); at most `FALLBACKS`."""
        status = self.driver.live.status()
        model = next((s.spec.model for s in status if s.name == instance), None)
        others = sorted((s for s in status if s.up and s.name != instance and s.spec.model == model),
                        key=lambda s: (s.outstanding_s, s.queued + s.running))
        out = []
        for s in others[:FALLBACKS]:
            backend = self.driver.runner.backends.get(s.name)
            if isinstance(backend, PickerBackend):
                out.append((s.name, backend.endpoint))
        return out

    def ready(self) -> bool:
        return not self.driver.draining and any(i["up"] for i in self.driver.instances())

    def health(self) -> tuple[int, dict[str, Any]]:
        """`GET /health` through the proxy, as the gateway answers it."""
        d = self.driver
        up = sum(1 for i in d.instances() if i["up"])
        status = "draining" if d.draining else "ok" if up else "unavailable"
        return (200 if status == "ok" else 503), {"status": status, "instances_up": up,
                                                  "open_queries": d.open_queries}


class ExternalProcessor(pb_grpc.ExternalProcessorServicer):
    def __init__(self, core: PickerCore) -> None:
        self.core = core

    async def Process(self, request_iterator: AsyncIterator[wire.ProcessingRequest],  # gRPC's name
                      context: grpc.aio.ServicerContext) -> AsyncIterator[wire.ProcessingResponse]:
        """Messages are read by their own task: when the proxy closes its side (its client
        left) while a request waits for its pick, the wait ends at once — the handler
        itself is never cancelled by a half-closed stream."""
        ex = ProxyExchange(self.core)
        inbox: asyncio.Queue[wire.ProcessingRequest | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for msg in request_iterator:
                    inbox.put_nowait(msg)
            finally:
                inbox.put_nowait(None)
                ex.proxy_left()

        reader = asyncio.create_task(read())
        try:
            while (msg := await inbox.get()) is not None:
                for out in await ex.on(msg):
                    yield out
        finally:
            reader.cancel()
            ex.closed()


class Health:
    """gRPC health, refreshed from the driver's state."""

    def __init__(self, core: PickerCore) -> None:
        self.core = core
        self.servicer = health_aio.HealthServicer()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.servicer.set("liveness", health_pb2.HealthCheckResponse.SERVING)
        await self._refresh()
        self._task = asyncio.create_task(self._loop(), name="flowserve-epp-health")

    async def _refresh(self) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if self.core.ready() else \
            health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", "readiness", EXT_PROC):
            await self.servicer.set(name, status)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            await self._refresh()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.servicer.enter_graceful_shutdown()


def grpc_server(core: PickerCore, health: Health) -> grpc.aio.Server:
    limit = core.max_body_bytes + (1 << 20)  # a buffered body comes in one message
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                      ("grpc.max_send_message_length", limit),
                                      ("grpc.so_reuseport", 0)])
    pb_grpc.add_ExternalProcessorServicer_to_server(ExternalProcessor(core), server)
    health_pb2_grpc.add_HealthServicer_to_server(health.servicer, server)
    return server
