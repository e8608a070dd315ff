"""Warm worker processes that run untrusted SQL (`WorkerPool`), as services that run
users' SQL do: the statement runs in a separate process (`flowserve.sqlexec.worker`)
under OS limits, and the pool kills it at the deadline — however the engine behaves.

A job takes an idle worker (or waits for one; at most `size` run at once), sends the
statement, and waits for the answer until the time limit plus `KILL_GRACE_S` (the
engine's own interrupt answers first when it can). A worker that overruns is killed; a
worker that dies (the CPU limit, memory, a crash) is reaped; either way the job gets a
clear `SQLError` and a fresh worker starts at once, so the pool stays warm. Thread-safe:
the gateway calls `run` from worker threads.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused
from flowserve.sqlexec.run import DEFAULT_LIMITS, Kind, check_sql, database_kind

KILL_GRACE_S = 0.5  # after the time limit, before the worker is killed
SPAWN_TIMEOUT_S = 60.0  # a fresh worker's imports (seconds on a loaded machine)


class _Worker:
    def __init__(self) -> None:
        # its own session: a Ctrl-C meant for the host does not reach it; it exits when
        # its stdin closes (also when the host dies)
        self.proc = subprocess.Popen([sys.executable, "-m", "flowserve.sqlexec.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self._pending = bytearray()
        self.ready = False

    def read_line(self, timeout_s: float) -> bytes | None:
        """The next line; None when the timeout passed, b"" when the worker is gone."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while (end := self._pending.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b""
            self._pending += chunk
        line = bytes(self._pending[:end])
        del self._pending[:end + 1]
        return line

    def wait_ready(self) -> None:
        if not self.ready:
            line = self.read_line(SPAWN_TIMEOUT_S)
            if line != b"ready":
                status = self.kill()
                raise SQLError(f"the SQL worker process did not start within {SPAWN_TIMEOUT_S:g} s" if line is None
                               else f"the SQL worker process exited while starting (status {status})")
            self.ready = True

    def send(self, job: dict[str, Any]) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def reap(self) -> int | None:
        """The exit status of a worker whose pipe closed (it is exiting), killed if it lingers."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(1.0)
        return self.kill()

    def kill(self) -> int | None:
        """Stop the worker now; its exit status (negative: the signal)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        return self.wait()

    def wait(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()
        return self.proc.returncode

    def close(self) -> None:
        """Ask the worker to exit (stdin closes), then make sure it did."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(2.0)
        self.kill()


def death_reason(returncode: int | None, limits: SandboxLimits) -> str:
    """Why a worker died mid-query, for the query's error."""
    if returncode == -signal.SIGXCPU:
        return f"query exceeded the CPU time limit of {limits.time_limit_s:g} s; its worker process was stopped"
    how = f"signal {signal.Signals(-returncode).name}" if returncode is not None and returncode < 0 \
        else f"exit status {returncode}"
    return (f"the query's worker process died ({how}); the query may have exceeded the memory limit of "
            f"{limits.worker_memory_bytes >> 20} MB")


def _answer(line: bytes) -> dict[str, Any]:
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("result", answer.get("error")), dict | str):
        raise SQLError("the SQL worker process answered something other than a result")
    return answer


class WorkerPool:
    """Up to `size` warm SQL worker processes; `run` has `run_query`'s contract."""

    def __init__(self, size: int = 2) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        self.size = size
        self.replaced = 0  # workers killed or dead and replaced
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._live = 0
        self._closed = False

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def warm(self) -> None:
        """Start the workers now (their imports run in the background)."""
        with self._cond:
            while not self._closed and self._live < self.size:
                self._idle.append(_Worker())
                self._live += 1

    def run(self, path: str | Path, sql: str, limits: SandboxLimits = DEFAULT_LIMITS,
            kind: Kind | None = None) -> dict[str, Any]:
        """Execute one read-only statement in a worker: `{columns, rows, truncated}`, or
        SQLError (SQLRefused when the sandbox refused it) with the reason."""
        check_sql(sql)
        job = {"path": str(path), "sql": sql, "kind": kind or database_kind(path), "limits": limits.to_json()}
        worker = self._acquire()
        healthy = False
        try:
            worker.wait_ready()
            line = worker.read_line(limits.time_limit_s + KILL_GRACE_S) if worker.send(job) else b""
            if line is None:
                worker.kill()
                raise SQLError(f"query exceeded the time limit of {limits.time_limit_s:g} s; "
                               "its worker process was stopped")
            if not line:
                raise SQLError(death_reason(worker.reap(), limits))
            answer = _answer(line)
            healthy = not answer.get("recycle")
        finally:
            self._release(worker, healthy)
        if "error" in answer:
            raise (SQLRefused if answer.get("refused") else SQLError)(answer["error"])
        return dict(answer["result"])

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for w in idle:
            w.close()

    def _acquire(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise SQLError("the SQL worker pool is closed")
                if self._idle:
                    worker = self._idle.pop()
                    if worker.proc.poll() is None:
                        return worker
                    worker.kill()  # it died while idle (killed from outside): start another
                    self._live -= 1
                    self.replaced += 1
                    continue
                if self._live < self.size:
                    self._live += 1
                    break
                self._cond.wait()
        try:
            return _Worker()
        except OSError as e:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise SQLError(f"cannot start a SQL worker process: {e}") from None

    def _release(self, worker: _Worker, healthy: bool) -> None:
        dead = not healthy
        if dead:
            worker.kill()
            with contextlib.suppress(OSError):  # warm again before the next job needs it
                if not self._closed:
                    worker, healthy = _Worker(), True
        with self._cond:
            self.replaced += dead
            if healthy and not self._closed:
                self._idle.append(worker)
            else:
                self._live -= 1
            self._cond.notify()
        if healthy and self._closed:
            worker.close()
