"""The host's listening sockets, for both faces: the HTTP gateway's and the endpoint
picker's port, bound before anything else starts, so a port in use is one line, not a
traceback."""

from __future__ import annotations

import errno
import socket

from flowserve.errors import ConfigError

DRAIN_MARGIN_S = 5.0  # after the drain deadline: time to write the last answers


def listening_socket(host: str, port: int) -> socket.socket:
    # proto IPPROTO_TCP, not 0: asyncio then sets TCP_NODELAY on accepted connections
    # (else each response waits ~40 ms for the client's delayed ACK)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def bind(host: str, port: int) -> socket.socket:
    """`flowserve serve`'s listening socket; ConfigError for a port out of range, a port
    in use, or an address this machine cannot listen on."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port: expected 1 to 65535, got {port}")
    try:
        return listening_socket(host, port)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: not an address of this machine ({e.strerror})") from None
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(f"--port {port}: {host}:{port} is already in use (another server listens there)") \
                from None
        raise ConfigError(f"--host {host} --port {port}: cannot listen there ({e.strerror})") from None
