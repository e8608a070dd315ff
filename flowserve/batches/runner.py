"""Running batches: each input line sent as the request it holds, its answer recorded
before it is counted, and the output and error files written when the batch ends.

The runner takes the open batches its store gives it (`BatchStore.claim`: one process
runs all of its own; a replica those it holds the lease of), so a batch interrupted by a
crash or a stop resumes where its results end: a line with a result is never sent
again, a line without one is. It keeps at most `max_in_flight` requests out at once over
all batches — they run in the scheduler's batch class, behind interactive work, so the
window only bounds what waits in the queue. A request refused for overload (429, 503)
is sent again later and counts for nothing until it is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from flowserve.batches.jsonl import BatchLine, ParsedInput, parse_input
from flowserve.batches.outputs import write_outputs
from flowserve.batches.records import BadTransition, BatchRecord, BatchStatus, LineResult, RequestCounts
from flowserve.batches.settings import BatchSettings
from flowserve.batches.store import BatchStore, FileFolder
from flowserve.batches.writer import ResultWriter

log = logging.getLogger("flowserve.batches")


@dataclass(frozen=True, slots=True)
class LineAnswer:
    """What one request got: its HTTP status and JSON body, or (`retry_after` set) a
    refusal for overload, to be sent again after that many seconds."""

    status: int
    body: Mapping[str, Any]
    request_id: str | None = None
    retry_after: float | None = None


# (tenant, endpoint, request body) → its answer
LineSender = Callable[[str, str, bytes], Awaitable[LineAnswer]]


class _Running:
    """A batch this runner is running, and what it was told since it started."""

    def __init__(self, rec: BatchRecord) -> None:
        self.rec = rec
        self.wake = asyncio.Event()  # cancelled or expired: stop sending
        self.task: asyncio.Task[None] | None = None

    def start(self, body: Callable[[_Running], Coroutine[Any, Any, None]]) -> None:
        self.task = asyncio.create_task(body(self), name=f"batch-{self.rec.id}")

    def renewed(self, rec: BatchRecord) -> None:
        """Its record as the store gave it at the latest claim."""
        self.rec = rec


class BatchRunner:
    def __init__(self, store: BatchStore, folder: FileFolder, settings: BatchSettings, send: LineSender,
                 clock: Callable[[], float], owner: str) -> None:
        """clock: the wall clock (Unix seconds: batches' timestamps and expiry); owner:
        this process's name in the store's leases."""
        self.store = store
        self.folder = folder
        self.settings = settings
        self._send = send
        self._clock = clock
        self._owner = owner
        self._window = asyncio.Semaphore(settings.max_in_flight)
        self._writer = ResultWriter(store, settings.retry_s, self._counted)
        self._running: dict[str, _Running] = {}
        self._poke = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.counts: dict[str, RequestCounts] = {}  # the latest counts of each batch run here

    def now(self) -> int:
        return int(self._clock())

    def start(self) -> None:
        self._writer.start()
        self._loop_task = asyncio.create_task(self._claim_loop(), name="batch-runner")

    def wake(self) -> None:
        """A batch was created or cancelled here: look now, not at the next lease renewal."""
        self._poke.set()

    async def stop(self, grace_s: float) -> None:
        """Send no more; wait up to `grace_s` for what is out, record it, and leave the rest
        (without results) to the next start."""
        self._stopping = True
        for run in self._running.values():
            run.wake.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace_s)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._writer.flush()
        await self._writer.stop()
        for batch_id in list(self._running):
            await self.store.release(self._owner, batch_id)

    # ------------------------------------------------------------------ claiming

    async def _claim_loop(self) -> None:
        every = self.settings.lease_s / 3
        while True:
            try:
                claimed = await self.store.claim(self._owner, self.settings.lease_s)
            except Exception as e:  # the store is lost: what runs goes on, and the next turn asks again
                log.warning("batches: cannot claim (%s: %s)", type(e).__name__, e)
                claimed = None
            if claimed is not None:
                self._take(claimed)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), every)
            self._poke.clear()

    def _take(self, claimed: list[BatchRecord]) -> None:
        now = self._clock()
        for rec in claimed:
            run = self._running.get(rec.id)
            if run is None:
                run = self._running[rec.id] = _Running(rec)
                run.start(self._run)
            run.renewed(rec)
            if rec.status is BatchStatus.CANCELLING or now >= rec.expires_at:
                run.wake.set()
        held = {rec.id for rec in claimed}
        for batch_id, run in self._running.items():  # a lease lost (paused too long): another replica has it
            if batch_id not in held and run.task is not None and not run.task.done():
                log.warning("batch %s: its lease went to another replica; stopping here", batch_id)
                run.wake.set()

    def _counted(self, batch_id: str, counts: RequestCounts) -> None:
        self.counts[batch_id] = counts

    # ------------------------------------------------------------------ one batch

    async def _run(self, run: _Running) -> None:
        try:
            await self._run_batch(run)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s: stopped by an error; it resumes at the next start", run.rec.id)
        finally:
            if not self._stopping:
                self._running.pop(run.rec.id, None)
                with contextlib.suppress(Exception):
                    await self.store.release(self._owner, run.rec.id)

    async def _run_batch(self, run: _Running) -> None:
        rec = run.rec
        if rec.status in (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS):
            parsed = await self._input(rec)
            if parsed is None:
                return
            if rec.status is BatchStatus.VALIDATING:
                with contextlib.suppress(BadTransition):  # else cancelled meanwhile: its end below
                    rec = await self.store.move(rec.id, BatchStatus.IN_PROGRESS, self.now(), total=parsed.total)
            if rec.status is BatchStatus.IN_PROGRESS:
                await self._writer.put_all(rec.id, [LineResult(e.line, e.custom_id, None, error=e.error())
                                                    for e in parsed.errors])
                done = await self.store.recorded(rec.id)
                await self._send_lines(run, [line for line in parsed.lines if line.line not in done])
            rec = await self._stored(rec.id)
            if rec.status is BatchStatus.IN_PROGRESS and self._clock() >= rec.expires_at:
                await self._expire(rec, parsed)
                return
            if rec.status is BatchStatus.IN_PROGRESS and rec.counts.done < rec.counts.total:
                return  # stopping, or the lease went elsewhere: the rest runs later
        await self._finish(rec.id)

    async def _input(self, rec: BatchRecord) -> ParsedInput | None:
        """The batch's lines; a batch whose input file is gone fails (None)."""
        try:
            data = await asyncio.to_thread(self.folder.read, rec.input_file_id)
        except OSError as e:
            if rec.status is BatchStatus.VALIDATING:
                await self.store.move(rec.id, BatchStatus.FAILED, self.now(), errors=(
                    {"code": "file_unreadable", "message": f"input_file_id {rec.input_file_id}: cannot read it "
                                                           f"({e.strerror})", "param": "input_file_id"},))
            else:
                log.error("batch %s: its input file %s is gone (%s)", rec.id, rec.input_file_id, e)
            return None
        return await asyncio.to_thread(parse_input, data, rec.endpoint)

    async def _send_lines(self, run: _Running, lines: list[BatchLine]) -> None:
        tasks: list[asyncio.Task[None]] = []
        try:
            for line in lines:
                await self._acquire(run)
                if run.wake.is_set():
                    break
                tasks.append(asyncio.create_task(self._line(run, line)))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def _acquire(self, run: _Running) -> None:
        """A place in the window, unless the batch is told to stop first (then none is taken)."""
        acquire = asyncio.ensure_future(self._window.acquire())
        stop = asyncio.ensure_future(run.wake.wait())
        await asyncio.wait((acquire, stop), return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if run.wake.is_set():
            if acquire.done() and not acquire.cancelled():
                self._window.release()
            acquire.cancel()

    async def _line(self, run: _Running, line: BatchLine) -> None:
        rec = run.rec
        try:
            while True:
                answer = await self._send(rec.tenant, rec.endpoint, line.body)
                if answer.retry_after is None:
                    break
                if self._stopping or run.wake.is_set():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(run.wake.wait(), answer.retry_after)
        finally:
            self._window.release()
        await self._writer.put(rec.id, LineResult(line.line, line.custom_id, answer.status, answer.request_id,
                                                  answer.body))

    async def _stored(self, batch_id: str) -> BatchRecord:
        rec = await self.store.batch(batch_id)
        if rec is None:
            raise KeyError(batch_id)
        return rec

    async def _expire(self, rec: BatchRecord, parsed: ParsedInput) -> None:
        """The window passed: every line without a result gets one saying so."""
        done = await self.store.recorded(rec.id)
        await self._writer.put_all(rec.id, [
            LineResult(line.line, line.custom_id, None, error={
                "code": "batch_expired", "message": f"the batch's completion window ({rec.completion_window}) "
                                                    "ended before this request ran"})
            for line in parsed.lines if line.line not in done])
        out, err = await write_outputs(rec, self.store, self.folder, self.now())
        await self.store.move(rec.id, BatchStatus.EXPIRED, self.now(), output_file_id=out, error_file_id=err)

    async def _finish(self, batch_id: str) -> None:
        """Every line has a result, or the batch was cancelled: its files, and its end."""
        rec = await self._stored(batch_id)
        if rec.status is BatchStatus.IN_PROGRESS:
            try:
                rec = await self.store.move(batch_id, BatchStatus.FINALIZING, self.now())
            except BadTransition:  # cancelled meanwhile
                rec = await self._stored(batch_id)
        if rec.status not in (BatchStatus.FINALIZING, BatchStatus.CANCELLING):
            return
        out, err = await write_outputs(rec, self.store, self.folder, self.now())
        end = BatchStatus.COMPLETED if rec.status is BatchStatus.FINALIZING else BatchStatus.CANCELLED
        await self.store.move(batch_id, end, self.now(), output_file_id=out, error_file_id=err)
