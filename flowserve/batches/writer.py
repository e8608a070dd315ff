"""Lines' results on their way to the store: whatever finished while the last write ran
goes in the next one, one step of the store per batch (`BatchStore.record`), and each
line learns when its result is recorded — only then is it counted, and only then does
its batch count it done."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from flowserve.batches.records import LineResult, RequestCounts
from flowserve.batches.store import BatchStore

log = logging.getLogger("flowserve.batches")


class ResultWriter:
    def __init__(self, store: BatchStore, retry_s: float, counted: Callable[[str, RequestCounts], None]) -> None:
        """retry_s: a write the store refused (lost) is tried again after this long;
        counted: hears each batch's counts after a write."""
        self._store = store
        self._retry_s = retry_s
        self._counted = counted
        self._queue: asyncio.Queue[tuple[str, LineResult, asyncio.Future[None]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="batch-results")

    async def put(self, batch_id: str, result: LineResult) -> None:
        """Returns once the result is recorded."""
        done = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((batch_id, result, done))
        await asyncio.shield(done)  # a line cancelled while it waits leaves its result to be written

    async def put_all(self, batch_id: str, results: list[LineResult]) -> None:
        await asyncio.gather(*(self.put(batch_id, r) for r in results))

    async def flush(self) -> None:
        """Returns once every result put so far is recorded."""
        await self.put("", LineResult(0, None, None))  # a marker: no batch's

    async def _loop(self) -> None:
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            by_batch: dict[str, list[LineResult]] = {}
            for batch_id, result, _ in items:
                if batch_id:
                    by_batch.setdefault(batch_id, []).append(result)
            for batch_id, results in by_batch.items():
                while True:
                    try:
                        counts = await self._store.record(batch_id, results)
                        break
                    except Exception as e:  # the store is lost: the results wait, uncounted
                        log.warning("batch %s: cannot record %d results (%s: %s); trying again in %.1f s",
                                    batch_id, len(results), type(e).__name__, e, self._retry_s)
                        await asyncio.sleep(self._retry_s)
                self._counted(batch_id, counts)
            for _, _, done in items:
                if not done.done():
                    done.set_result(None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
