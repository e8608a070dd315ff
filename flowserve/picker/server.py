"""Running the endpoint picker: `flowserve epp`, and a background picker for tests.

One asyncio loop (uvloop) runs the gRPC server (ext_proc and health), the gateway's live
driver and, on `metrics_port`, a small HTTP server with `/metrics` (Prometheus, the
gateway's series plus the picker's) and `/health`. SIGINT/SIGTERM drain: health turns
NOT_SERVING, the driver refuses new requests (503 through the proxy) and gives the open
ones `drain_timeout_s`, then the gRPC server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import uvicorn
import uvloop
from prometheus_client import CONTENT_TYPE_LATEST

from flowserve.errors import ConfigError
from flowserve.host.listen import DRAIN_MARGIN_S, bind
from flowserve.host.settings import ServeConfig
from flowserve.picker.service import Health, PickerCore, grpc_server

log = logging.getLogger("flowserve.picker")
LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def metrics_app(core: PickerCore) -> Callable[..., Awaitable[None]]:
    async def app(scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]],
                  send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/metrics":
            status, ctype, body = 200, CONTENT_TYPE_LATEST.encode(), core.driver.metrics.render()
        elif scope["path"] == "/health":
            status, data = core.health()
            ctype, body = b"application/json", orjson.dumps(data)
        else:
            status, ctype, body = 404, b"application/json", b'{"error": {"message": "not found"}}'
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    return app


class PickerServer:
    """The endpoint picker on `host:port` (gRPC), and `/metrics` on `metrics_port` (None: off)."""

    def __init__(self, config: ServeConfig, host: str = "127.0.0.1", port: int = 9002,
                 metrics_port: int | None = None, log_level: str = "info") -> None:
        if not 0 <= port <= 65535 or (metrics_port is not None and not 0 <= metrics_port <= 65535):
            raise ConfigError(f"--port/--metrics-port: expected 0 to 65535, got {port}/{metrics_port}")
        if log_level.upper() not in LOG_LEVELS:
            raise ConfigError(f"--log-level: one of {', '.join(x.lower() for x in LOG_LEVELS)}, got {log_level!r}")
        self.config = config
        self.host = host
        if port:  # a port in use is one clear line, before start-up
            bind(host, port).close()
        self.port = port
        self.metrics_port = metrics_port
        self.log_level = log_level
        self.ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        core = PickerCore(self.config)
        await core.start()
        health = Health(core)
        server, bound = None, 0
        for _attempt in range(1 if self.port else 5):  # an ephemeral port can be taken while gRPC binds it
            server = grpc_server(core, health)  # a server whose bind failed is not reused
            try:
                bound = server.add_insecure_port(f"{self.host}:{self.port}")
            except RuntimeError:
                bound = 0
            if bound:
                break
        if server is None or bound == 0:
            await core.stop()
            raise ConfigError(f"--host {self.host} --port {self.port}: cannot listen there")
        self.port = bound
        await health.start()
        await server.start()
        web: tuple[uvicorn.Server, asyncio.Task[None]] | None = None
        if self.metrics_port is not None:
            sock = bind(self.host, self.metrics_port)
            self.metrics_port = sock.getsockname()[1]
            http = uvicorn.Server(uvicorn.Config(metrics_app(core), log_level="warning", lifespan="off",
                                                 access_log=False))
            web = http, asyncio.create_task(http.serve(sockets=[sock]))
        log.info("flowserve endpoint picker listening on %s:%d (gRPC ext_proc + health)%s", self.host, self.port,
                 f", metrics on http://{self.host}:{self.metrics_port}/metrics" if web else "")
        self.ready.set()
        try:
            await self._stop.wait()
        finally:  # open streams keep their RPCs while the core drains: programs close, queries finish
            await health.stop()
            stopping = asyncio.create_task(server.stop(self.config.gateway.drain_timeout_s + DRAIN_MARGIN_S))
            await core.stop()
            await stopping
            if web is not None:
                web[0].handle_exit(signal.SIGTERM, None)
                await web[1]

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended (a failed start): nothing to stop
                self._loop.call_soon_threadsafe(self._stop.set)

    def run(self) -> None:
        """Serve in the foreground until SIGINT/SIGTERM (the process's logging set up here)."""
        logging.basicConfig(level=self.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.stop)
            await self.serve()
        uvloop.run(main())

    # ------------------------------------------------------------------ in a thread

    def start_background(self, timeout_s: float = 60.0) -> PickerServer:
        def target() -> None:
            try:
                uvloop.run(self.serve())
            except BaseException as e:
                self.error = e
            finally:
                self.ready.set()
        self._thread = threading.Thread(target=target, name="flowserve-epp", daemon=True)
        self._thread.start()
        if not self.ready.wait(timeout_s) or self.error is not None:
            self.stop_background()
            raise RuntimeError(f"the endpoint picker did not start: {self.error!r}")
        return self

    def stop_background(self, timeout_s: float = 120.0) -> None:
        self.stop()
        with contextlib.suppress(AttributeError):
            self._thread.join(timeout_s)

    def __enter__(self) -> PickerServer:
        return self.start_background()

    def __exit__(self, *exc: object) -> None:
        self.stop_background()
