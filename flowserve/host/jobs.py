"""Runs the core's `RunJob`s off the event loop and reports each as a `JobFinished`.

A job is named by the core and looked up in the driver's registry (e.g. "alpha_sweep":
Hexgen's α sweep, simulations of the last window). It is pure CPU work: it runs in a
worker process so serving never waits for it — or in a thread when its arguments cannot
be pickled — and its result or error comes back as an event.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Literal

from flowserve.types.commands import RunJob
from flowserve.types.events import JobFinished

log = logging.getLogger("flowserve.gateway")


class JobRunner:
    def __init__(self, mode: Literal["process", "thread"], registry: Mapping[str, Callable[..., Any]],
                 clock: Callable[[], float], report: Callable[[JobFinished], None],
                 count: Callable[[str], None]) -> None:
        self._mode = mode
        self._registry = dict(registry)
        self._clock = clock
        self._report = report
        self._count = count  # "done" | "failed", for metrics
        self._processes: Executor | None = None
        self._threads: Executor | None = None

    def run(self, cmd: RunJob) -> None:
        fn = self._registry.get(cmd.name)
        if fn is None:
            self._count("failed")
            self._report(JobFinished(self._clock(), cmd.job_id, error=f"no job {cmd.name!r} is registered"))
            return
        fut = asyncio.get_running_loop().run_in_executor(self._executor(fn, cmd), fn, *cmd.args)

        def finished(f: asyncio.Future[Any]) -> None:
            if f.cancelled():
                return
            err = f.exception()
            self._count("failed" if err else "done")
            self._report(JobFinished(self._clock(), cmd.job_id, None if err else f.result(),
                                     None if err is None else f"{type(err).__name__}: {err}"))

        fut.add_done_callback(finished)

    def _executor(self, fn: Callable[..., Any], cmd: RunJob) -> Executor:
        if self._mode == "process":
            try:
                pickle.dumps((fn, cmd.args))
            except Exception:
                log.info("job %d cannot be pickled; running it in a thread", cmd.job_id)
            else:
                if self._processes is None:
                    self._processes = ProcessPoolExecutor(max_workers=1)
                return self._processes
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowserve-job")
        return self._threads

    def shutdown(self) -> None:
        for ex in (self._processes, self._threads):
            if ex is not None:
                ex.shutdown(wait=False, cancel_futures=True)
