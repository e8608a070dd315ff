"""Running the gateway under uvicorn: `flowserve serve`, and a background server for
tests and benchmarks (bound to 127.0.0.1 on a free port, ready once start-up finished)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import uvicorn

from flowserve.gateway.app import create_app
from flowserve.gateway.settings import ServeConfig


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Serve until interrupted; SIGINT/SIGTERM drain in-flight work before exiting."""
    app = create_app(config)
    uvicorn.run(app, host=host, port=port, log_level=log_level,
                timeout_graceful_shutdown=int(config.gateway.drain_timeout_s) + 1)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class BackgroundServer:
    """An ASGI app served by uvicorn in a thread of this process."""

    def __init__(self, app: Any, host: str = "127.0.0.1", log_level: str = "warning",
                 graceful_s: float = 30.0) -> None:
        self.app = app
        # proto IPPROTO_TCP, not 0: asyncio then sets TCP_NODELAY on accepted connections
        # (else each response waits ~40 ms for the client's delayed ACK)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.host, self.port = self._sock.getsockname()[:2]
        config = uvicorn.Config(app, log_level=log_level, lifespan="on",
                                timeout_graceful_shutdown=int(graceful_s))
        self.server = _Server(config)
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

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful: uvicorn finishes open requests, then the driver drains."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
