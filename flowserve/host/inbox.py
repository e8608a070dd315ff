"""The live driver's inbox: everything that happens — arrivals, engine answers, tool and
job results, ticks, functions to run in the driver's loop — reaches the core through one
queue, in order. Callers may wait until the driver has made progress enough."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Control:
    """Run `fn(now)` in the driver's loop; its result (or exception) resolves `fut`."""

    fn: Callable[[float], Any]
    fut: asyncio.Future[Any]

    def run(self, now: float) -> None:
        try:
            result = self.fn(now)
        except Exception as e:
            self.fut.set_exception(e)
        else:
            self.fut.set_result(result)


STOP = object()  # the driver's loop ends when it takes this


class Inbox:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] | None = None
        self._progress: asyncio.Event | None = None

    def open(self) -> None:
        """In the driver's event loop, before anything is put."""
        self._queue = asyncio.Queue()
        self._progress = asyncio.Event()

    def put(self, item: Any) -> None:
        assert self._queue is not None, "the driver is not started"
        self._queue.put_nowait(item)

    def qsize(self) -> int:
        """Items waiting (0 before the driver starts)."""
        return 0 if self._queue is None else self._queue.qsize()

    async def get(self) -> Any:
        assert self._queue is not None, "the driver is not started"
        return await self._queue.get()

    async def control(self, fn: Callable[[float], Any]) -> Any:
        """`fn(now)` run in the driver's loop, between two items (raises what it raises)."""
        fut = asyncio.get_running_loop().create_future()
        self.put(Control(fn, fut))
        return await fut

    def progressed(self) -> None:
        """The driver took an item (or changed state): waiters re-check."""
        if self._progress is not None:
            self._progress.set()

    async def until(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        """Wait until `predicate()` holds, re-checked after each item the driver takes
        (raises TimeoutError)."""
        assert self._progress is not None, "the driver is not started"
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self._progress.clear()
                await self._progress.wait()
