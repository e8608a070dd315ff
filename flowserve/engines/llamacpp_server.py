"""One `llama-server` process on 127.0.0.1 (the binary: `flowserve.engines.llamacpp_build`).

    with LlamaServer(model_gguf, ctx_size=16384, parallel=4, threads=1, binary=binary) as srv:
        srv.base_url                          # "http://127.0.0.1:PORT", /health already 200

`LlamaServer` starts the process on a free port of 127.0.0.1 with its log in a file,
polls `/health` until it answers 200 (deadline, not a fixed sleep), and stops it with
SIGTERM, then SIGKILL. A finalizer kills a server that was never stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import httpx

from flowserve.engines.llamacpp_build import ensure_llama_server
from flowserve.errors import FlowserveError
from flowserve.profiles.slot_config import SlotConfig, cache_ram_tokens


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


class LlamaServer:
    """One llama-server process serving `model` on 127.0.0.1 (a context manager)."""

    def __init__(self, model: Path, *, ctx_size: int = 4096, parallel: int = 1, threads: int = 1,
                 kv_unified: bool = True, cache_ram: int | None = None, metrics: bool = True,
                 alias: str | None = None, extra_args: Sequence[str] = (), binary: Path | None = None,
                 port: int | None = None, log_path: Path | None = None, cpus: str | None = None,
                 slots_prompts: bool = False) -> None:
        """slots_prompts: `/slots` names each slot's prompt (`LLAMA_SERVER_SLOTS_DEBUG=1`), which a
        gateway tops its cache estimate up with (`flowserve.host.slots_feed`)."""
        self.model = Path(model)
        self.host = "127.0.0.1"
        self.port = port
        self.alias = alias or self.model.stem
        self.ctx_size, self.parallel, self.threads, self.kv_unified = ctx_size, parallel, threads, kv_unified
        self.cache_ram = cache_ram
        self._binary = binary
        self.cpus = cpus  # `taskset -c CPUS`: pinned threads measure steadier on a shared machine
        self.env = {**os.environ, "LLAMA_SERVER_SLOTS_DEBUG": "1"} if slots_prompts else None
        self._opts = [
            "-m", str(self.model), "-c", str(ctx_size), "-np", str(parallel), "-t", str(threads),
            "--alias", self.alias, "--no-webui",
            "--kv-unified" if kv_unified else "--no-kv-unified",
            *(["--cache-ram", str(cache_ram)] if cache_ram is not None else []),
            *(["--metrics"] if metrics else []),
            *extra_args,
        ]
        self._own_log = log_path is None
        self.log_path = log_path or Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def base_url(self) -> str:
        assert self.port is not None, "not started"
        return f"http://{self.host}:{self.port}"

    @property
    def seq_context(self) -> int:
        """Tokens one sequence may hold: all of `-c` with a unified KV cache, else `-c / -np`."""
        return self.ctx_size if self.kv_unified else self.ctx_size // self.parallel

    @property
    def kv_capacity_tokens(self) -> int:
        """KV cells in all (`-c`), shared by the slots or split evenly among them."""
        return self.ctx_size

    def slot_config(self) -> SlotConfig:
        """Its slot rules, for the profile the simulator models it with."""
        return SlotConfig(self.kv_unified, cache_ram_tokens(self.cache_ram, None, self.ctx_size))

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        binary = self._binary or ensure_llama_server()
        pin = ["taskset", "-c", self.cpus] if self.cpus is not None and shutil.which("taskset") else []
        return [*pin, str(binary), *self._opts, "--host", self.host, "--port", str(self.port)]

    def start(self, timeout: float = 60.0) -> LlamaServer:
        assert self._proc is None, "already started"
        if not self.model.exists():
            raise FlowserveError(f"llama-server model {str(self.model)!r} does not exist")
        fixed_port = self.port is not None
        why = ""
        for _attempt in range(3):  # a free port can be taken between probing and binding
            if not fixed_port:
                self.port = free_port()
            with open(self.log_path, "wb") as log:
                self._proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, env=self.env)
            self._finalizer = weakref.finalize(self, _kill, self._proc)
            if self._wait_healthy(timeout):
                return self
            code = self._proc.poll()
            why = f"exited with code {code}" if code is not None else f"was not healthy after {timeout:.0f} s"
            retry = not fixed_port and code is not None and "bind" in self.log_tail(5)
            self.stop()
            if not retry:
                break
        tail = self.log_tail(12)
        if self._own_log:
            self.log_path.unlink(missing_ok=True)
        raise FlowserveError(f"llama-server {why}; log tail:\n{tail}")

    def _wait_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        assert self._proc is not None
        with httpx.Client(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{self.base_url}/health").status_code == 200:
                        return True
                time.sleep(0.05)  # polling interval of a deadline-bounded wait
        return False

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> LlamaServer:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_log:
            self.log_path.unlink(missing_ok=True)
