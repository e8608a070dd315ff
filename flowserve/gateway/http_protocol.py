"""uvicorn's HTTP protocol (httptools) with the limits it does not have on a request head:
its size (`gateway.max_header_bytes`), its header count (`gateway.max_headers`), and the
time a connection may take to send it (`gateway.header_timeout_s`).

Without them one request could hold a megabyte of headers, or ten thousand, and a
connection that opened and sent nothing (or a byte now and then) was kept forever.
Beyond a limit the answer is 431 with the gateway's JSON error and the connection
closes — lingering (`LINGER_S`, reading and dropping what the client still sends) so the
client reads the answer instead of a reset; a head that does not arrive in time closes
the connection. The clock starts when
the connection opens and again when an answer is complete (the next request's head);
it never runs while a request is being answered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

LINGER_S = 2.0  # after a 431: how long the rest of the client's request is read and dropped


@dataclass(frozen=True)
class HeadLimits:
    max_bytes: int = 64 << 10
    max_headers: int = 100
    timeout_s: float = 30.0


class _TooManyHeaders(Exception):
    pass


class BoundedHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, limits: HeadLimits, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.limits = limits
        self._in_head = True
        self._head_bytes = 0
        self._headers = 0
        self._refused: str | None = None
        self._lingering = False
        self._timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ the clock

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._start_clock()

    def _start_clock(self) -> None:
        self._stop_clock()
        self._timer = self.loop.call_later(self.limits.timeout_s, self._late)

    def _stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _late(self) -> None:
        self._timer = None
        if self._in_head and not self.transport.is_closing():
            self.transport.close()

    # ------------------------------------------------------------------ the head

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.limits.max_bytes and not self._lingering \
                and not self.transport.is_closing():
            self._refuse(f"the request head exceeds {self.limits.max_bytes} bytes (gateway.max_header_bytes)")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        if self._headers > self.limits.max_headers:
            self._refused = f"more than {self.limits.max_headers} headers (gateway.max_headers)"
            raise _TooManyHeaders  # stops the parser; uvicorn answers through send_400_response
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_clock()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._headers = True, 0, 0  # what follows is the next request's head

    def send_400_response(self, msg: str) -> None:
        if self._refused is None:
            return super().send_400_response(msg)
        self._refuse(self._refused)

    def _refuse(self, message: str) -> None:
        body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                       "code": "request_header_fields_too_large"}})
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        # closing with unread input would reset the connection, and the client might never
        # read the answer: stop writing, drop what still comes, then close
        self._lingering = True
        self._stop_clock()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)
