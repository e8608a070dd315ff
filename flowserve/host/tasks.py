"""The host's background tasks (engine calls, tool ops, tokenizations, probes): each is
held until it ends, so none is collected while it runs, and shutdown cancels the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class TaskSet:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def cancel_all(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
