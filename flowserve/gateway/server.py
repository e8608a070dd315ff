"""Running the gateway under uvicorn: `flowserve serve`, and a background server for
tests and benchmarks (bound to 127.0.0.1 on a free port, ready once start-up finished).

Shutdown is a drain: on SIGINT/SIGTERM the listener closes, the driver refuses new
queries and gives the open ones `drain_timeout_s`; what is still open then fails with
that reason (503 JSON, or an in-band error event and `[DONE]` on a stream). uvicorn's own
graceful-shutdown timeout is the drain timeout plus `DRAIN_MARGIN_S`, so it never cuts
the drain short. uvloop and httptools serve HTTP (the fastest loop and parser uvicorn has).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import os
import signal
import socket
import threading
from typing import Any

import uvicorn

from flowserve.gateway.app import create_app
from flowserve.gateway.asgi import GatewayASGI
from flowserve.gateway.http_protocol import BoundedHttpProtocol, HeadLimits
from flowserve.host.listen import DRAIN_MARGIN_S, bind, listening_socket
from flowserve.host.replica import check_state, replicated
from flowserve.host.root import LiveHost
from flowserve.host.settings import GatewaySettings, ServeConfig


def uvicorn_config(app: Any, drain_timeout_s: float, limits: HeadLimits | None = None, **kw: Any) -> uvicorn.Config:
    """limits: a gateway's bounds on request heads (`BoundedHttpProtocol`)."""
    http: Any = "httptools" if limits is None else functools.partial(BoundedHttpProtocol, limits=limits)
    return uvicorn.Config(app, loop="uvloop", http=http, lifespan="on", access_log=False,
                          timeout_graceful_shutdown=int(drain_timeout_s + DRAIN_MARGIN_S) + 1, **kw)


def gateway_of(app: Any) -> LiveHost | None:
    """The host behind an app `create_app` made (None: another ASGI app)."""
    return app.host if isinstance(app, GatewayASGI) else None


def head_limits(s: GatewaySettings) -> HeadLimits:
    return HeadLimits(s.max_header_bytes, s.max_headers, s.header_timeout_s)


class GatewayServer(uvicorn.Server):
    """uvicorn that drains the gateway's driver while it waits for open connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        gw = gateway_of(self.config.app)
        drain = asyncio.ensure_future(gw.driver.drain()) if gw is not None else None
        try:
            await super().shutdown(sockets)
        finally:
            if drain is not None:
                with contextlib.suppress(Exception):
                    await drain


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          workers: int = 1) -> None:
    """Serve until interrupted; SIGINT/SIGTERM drain in-flight work before exiting.

    workers > 1: that many gateway processes accept on one listening socket (the kernel
    spreads connections). Each is a whole gateway — its own scheduler core and prefix
    index over all instances — and they share one view as replicas (`gateway.state`; a
    private redis-server when the config names none), so HTTP, JSON and SSE work scales
    with cores while they schedule as one (docs/replicas.md)."""
    sock = bind(host, port)  # before anything else: a port in use is one line, not a traceback
    try:
        with replicated(config, workers) as config:
            state = config.gateway.state
            if state is not None:  # a wrong URL or another config there: one line now, not a failed start-up
                asyncio.run(check_state(state, config.instances, config.gateway))
            _serve(config, sock, log_level, workers)
    finally:
        sock.close()


def _serve(config: ServeConfig, sock: socket.socket, log_level: str, workers: int) -> None:
    if workers <= 1:
        server = GatewayServer(uvicorn_config(create_app(config), config.gateway.drain_timeout_s,
                                              head_limits(config.gateway), log_level=log_level))
        announce(sock)
        server.run(sockets=[sock])
        return
    ctx = multiprocessing.get_context("fork")  # children inherit the bound socket
    procs = [ctx.Process(target=_worker, args=(config, sock, log_level, i == 0), name=f"flowserve-gateway-{i}")
             for i in range(workers)]
    for p in procs:
        p.start()

    def stop(_sig: int, _frame: object) -> None:
        for p in procs:
            if p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for p in procs:
        p.join()


def announce(sock: socket.socket) -> None:
    """The address the gateway really listens on (uvicorn names none for a given socket)."""
    host, port = sock.getsockname()[:2]
    logging.getLogger("uvicorn.error").info("flowserve gateway listening on http://%s:%d (Ctrl-C drains and "
                                            "stops)", f"[{host}]" if ":" in host else host, port)


def _worker(config: ServeConfig, sock: socket.socket, log_level: str, first: bool) -> None:
    server = GatewayServer(uvicorn_config(create_app(config), config.gateway.drain_timeout_s,
                                          head_limits(config.gateway), log_level=log_level))
    if first:
        announce(sock)
    server.run(sockets=[sock])


class BackgroundServer:
    """An ASGI app served by uvicorn in a thread of this process."""

    def __init__(self, app: Any, host: str = "127.0.0.1", log_level: str = "warning",
                 graceful_s: float | None = None, port: int = 0) -> None:
        self.app = app
        self._sock = listening_socket(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        gw = gateway_of(app)
        drain = graceful_s if graceful_s is not None else gw.config.gateway.drain_timeout_s if gw else 30.0
        limits = head_limits(gw.config.gateway) if gw is not None else None
        self.server = GatewayServer(uvicorn_config(app, drain, limits, log_level=log_level))
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="flowserve-gateway", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self._sock])
        except BaseException as e:  # start-up failure: tell the waiting owner
            self._error = e
        finally:
            self.server.ready.set()

    def start(self, timeout_s: float = 60.0) -> BackgroundServer:
        self._thread.start()
        if not self.server.ready.wait(timeout_s) or self._error is not None or not self.server.started:
            self.stop()
            raise RuntimeError(f"the gateway did not start: {self._error!r}")
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        """Graceful: the driver drains, uvicorn finishes the open responses (RuntimeError
        when that takes longer than `timeout_s`)."""
        self.server.handle_exit(signal.SIGTERM, None)  # as a SIGTERM would: the graceful exit
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError(f"the gateway did not stop within {timeout_s:g} s")

    def __enter__(self) -> BackgroundServer:
        return self if self._thread.is_alive() else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
