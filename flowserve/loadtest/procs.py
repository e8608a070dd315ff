"""A benchmark's server as a child process: started in its own session, `/health` polled
until it answers 200 (deadline, not a fixed sleep), and its whole process group stopped on
exit; `llama_servers`, a set of llama-servers stopped together."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.errors import FlowserveError


@contextlib.contextmanager
def served(args: Sequence[str], health: str, log: Path, timeout_s: float = 60.0, poll_s: float = 0.2,
           env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` (output to `log`) until `health` answers 200; stop it (SIGTERM, then SIGKILL) on exit."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + timeout_s
        while True:  # a deadline-bounded wait for the server to answer
            if proc.poll() is not None:
                tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
                raise FlowserveError(f"{list(args[:4])} exited with {proc.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health, timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise FlowserveError(f"{list(args[:4])} was not healthy after {timeout_s:g} s; see {log}")
            time.sleep(poll_s)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def llama_servers(n: int, model: Path, binary: Path, slots: int, log_dir: Path, alias: str = "tiny-llama",
                  cache_ram: int | None = 0) -> Iterator[list[LlamaServer]]:
    """`n` llama-servers of one thread, `slots` slot caches of 4096 tokens each; every one
    started is stopped on exit, also when a later one fails to start."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(LlamaServer(model, ctx_size=4096 * slots, parallel=slots, threads=1,
                                               cache_ram=cache_ram, alias=alias, binary=binary,
                                               log_path=log_dir / f"llama-{i}.log")) for i in range(n)]
