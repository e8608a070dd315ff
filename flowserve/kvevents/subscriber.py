"""The gateway's subscriber to one engine's KV-cache events (pyzmq, asyncio).

Per data-parallel rank it connects a SUB socket to the rank's publisher (vLLM's ports:
endpoint + rank) and, when the engine has one, a DEALER socket to its replay ROUTER
(vLLM's protocol: send `[b"", start seq (8 bytes, big-endian)]`; the answer is one
`[b"", topic, seq, payload]` per buffered batch from `start` on, then `[b"", b"", -1, b""]`
— vLLM 0.32; earlier versions leave the topic out, and both are read). What it
reads goes through `RankStream` (sequence numbers, replays, holes) and reaches the driver
as `KVCacheEvents` — up to `CHUNK` batches and `SLICE_BLOCKS` blocks per event (a larger
batch is split, its long stored runs too), one event per turn of the loop —
and `KVViewChanged` when the instance's view becomes precise (every rank complete) or
estimated. Bad input is counted by kind (`counts`, and `count` for the metrics) and
logged, the first few of each kind and then every 1,000th; nothing a publisher sends can
raise out of the subscriber or hold the event loop: it decodes a large batch in a worker
thread, hands the driver at most `SLICE_BLOCKS` blocks per turn, yields after every chunk, waits for
`room` (the driver has taken what it was given) before reading on, and while the socket
stays full it leaves the loop to the rest of the gateway as long as its chunk took (at
most half the loop's time). A publisher faster than that queues in the socket, then
loses batches there — a gap like any other, replayed or leaving the view estimated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import zmq
import zmq.asyncio

from flowserve.kvevents.stream import Action, Apply, AskReplay, Bad, Complete, Lost, Payload, RankStream, in_slices
from flowserve.kvevents.wire import WireError, decode_batch
from flowserve.types.kv import CacheChange, KVCacheEvents, KVEventsSpec, KVViewChanged

log = logging.getLogger("flowserve.kvevents")
CHUNK = 64  # batches per KVCacheEvents (bounds one step of the driver: a few ms)
LARGE_PAYLOAD_BYTES = 64 << 10  # batches at least this large are decoded off the event loop
SLICE_BLOCKS = 1024  # blocks per KVCacheEvents at most: a batch of 65,536 blocks is 64 turns of the loop
REPLAY_TIMEOUT_S = 2.0  # a replay socket silent this long has failed
MAX_PAUSE_S = 0.02  # the longest a flooded subscriber leaves the loop to others between chunks
RETRY_S = 10.0  # while a rank has a hole a replay may still fill, ask again this often
RCVHWM = 100_000  # batches the SUB socket queues while the subscriber replays or pauses
LOGGED = 5  # first reports of each kind logged; then every 1,000th
END_SEQ = -1


def rank_endpoint(endpoint: str, rank: int) -> str:
    """Where rank `rank` publishes: vLLM offsets a tcp port by the rank and suffixes ipc paths."""
    if rank == 0:
        return endpoint
    if endpoint.startswith("tcp://"):
        base, _, port = endpoint.rpartition(":")
        return f"{base}:{int(port) + rank}"
    return f"{endpoint}_dp{rank}"


class EngineSubscriber:
    def __init__(self, instance: str, spec: KVEventsSpec, put: Callable[[Any], None], clock: Callable[[], float],
                 room: Callable[[], Awaitable[None]] | None = None, count: Callable[[str, str], None] | None = None,
                 replay_timeout_s: float = REPLAY_TIMEOUT_S, retry_s: float = RETRY_S) -> None:
        self.instance = instance
        self.spec = spec
        self._put = put
        self._clock = clock
        self._room = room
        self._count = count
        self.replay_timeout_s = replay_timeout_s
        self.retry_s = retry_s
        self.counts: dict[str, int] = {}
        self.batches = 0  # batches read (live and replayed)
        self.precise: bool | None = None  # what the driver was told (None: nothing yet)
        self._complete: dict[int, bool] = dict.fromkeys(range(spec.data_parallel_size), False)
        # the process's one context, never a context of our own: a context collected while a
        # socket of a task that never finished is still open blocks the collecting thread in
        # zmq_term forever (seen: a whole test session hung in Context.__del__)
        self._ctx = zmq.asyncio.Context.instance()
        self._tasks: list[asyncio.Task[None]] = []
        self._dealers: dict[int, zmq.asyncio.Socket] = {}

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._follow(r), name=f"kv-events-{self.instance}-{r}")
                       for r in range(self.spec.data_parallel_size)]

    async def aclose(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for s in self._dealers.values():
            s.close(linger=0)
        self._dealers.clear()

    # ------------------------------------------------------------------ one rank

    async def _follow(self, rank: int) -> None:
        sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, RCVHWM)
        sub.setsockopt(zmq.LINGER, 0)
        sub.connect(rank_endpoint(self.spec.endpoint, rank))
        sub.setsockopt(zmq.SUBSCRIBE, self.spec.topic.encode())
        stream = RankStream(rank, self.spec.replay is not None)
        try:
            await self._act(rank, stream, stream.start())
            while True:
                try:
                    frames = await asyncio.wait_for(sub.recv_multipart(), self.retry_s)
                except TimeoutError:
                    await self._act(rank, stream, stream.retry())
                    continue
                began = time.perf_counter()
                actions = await self._live(stream, frames)
                full = True
                for _ in range(CHUNK - 1):  # what else is already there, up to a chunk
                    if not sub.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                        full = False
                        break
                    actions += await self._live(stream, await sub.recv_multipart())
                await self._act(rank, stream, actions)
                await asyncio.sleep(0)  # one chunk per turn: the gateway keeps answering
                if self._room is not None:
                    with contextlib.suppress(TimeoutError):  # a driver stuck that long: read on regardless
                        await self._room()  # the driver took it: the next chunk
                if full:  # a flood: leave the loop to the rest of the gateway as long as the chunk took
                    await asyncio.sleep(min(time.perf_counter() - began, MAX_PAUSE_S))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug, not bad input (that is counted): say so, and leave the view estimated
            log.exception("kv events of %s rank %d: subscriber failed", self.instance, rank)
            self._rank_state(rank, False, "the subscriber failed (see the log)")
        finally:
            sub.close(linger=0)

    async def _live(self, stream: RankStream, frames: list[bytes]) -> list[Action]:
        if len(frames) != 3 or len(frames[1]) != 8:
            return [Bad("frames", f"rank {stream.rank}: a message of {len(frames)} frames (topic, seq, payload "
                                  "expected)")]
        self.batches += 1
        return stream.live(int.from_bytes(frames[1], "big", signed=True), await _decoded(frames[2], stream.rank))

    async def _act(self, rank: int, stream: RankStream, actions: list[Action]) -> None:
        changes: list[CacheChange] = []
        for a in actions:
            if isinstance(a, Apply):
                changes.extend(a.changes)
            elif isinstance(a, Bad):
                self._bad(a)
            else:
                await self._flush(changes)
                if isinstance(a, Complete):
                    self._rank_state(rank, True, a.reason)
                elif isinstance(a, Lost):
                    self._rank_state(rank, False, a.reason)
                elif isinstance(a, AskReplay):
                    await self._replay(rank, stream, a.start)
        await self._flush(changes)

    async def _flush(self, changes: list[CacheChange]) -> None:
        """Hand the changes to the driver: a slice of at most SLICE_BLOCKS blocks at a time,
        leaving the loop to the rest of the gateway between slices (one huge batch is applied
        over many turns, never in one)."""
        if not changes:
            return
        slices = in_slices(changes, SLICE_BLOCKS)
        changes.clear()
        for k, piece in enumerate(slices):
            if k:
                await asyncio.sleep(0)
                if self._room is not None:
                    with contextlib.suppress(TimeoutError):
                        await self._room()
            self._put(KVCacheEvents(self._clock(), self.instance, piece))

    async def _replay(self, rank: int, stream: RankStream, start: int) -> None:
        """Ask the replay socket for every batch from `start` and apply them in order."""
        sock = self._dealers.get(rank)
        if sock is None:
            assert self.spec.replay is not None
            sock = self._dealers[rank] = self._ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(rank_endpoint(self.spec.replay, rank))
        await sock.send_multipart([b"", start.to_bytes(8, "big", signed=True)])
        actions: list[Action] = []
        try:
            while True:
                frames = await asyncio.wait_for(sock.recv_multipart(), self.replay_timeout_s)
                parts = frames[2:] if len(frames) == 4 else frames[1:]  # without the delimiter and any topic
                if len(frames) not in (3, 4) or frames[0] != b"" or len(parts[0]) != 8:
                    self._bad(Bad("frames", f"rank {rank}: a replay answer of {len(frames)} frames"))
                    continue
                seq = int.from_bytes(parts[0], "big", signed=True)
                if seq == END_SEQ:
                    actions += stream.replay_done()
                    break
                self.batches += 1
                actions += stream.replayed(seq, await _decoded(parts[1], rank))
                if len(actions) >= CHUNK:
                    await self._act(rank, stream, actions)
                    actions = []
                    await asyncio.sleep(0)
        except TimeoutError:
            # a late answer must not be taken for the next request's: a fresh socket next time
            self._dealers.pop(rank).close(linger=0)
            actions += stream.replay_failed(f"no answer within {self.replay_timeout_s:g} s")
        await self._act(rank, stream, actions)

    # ------------------------------------------------------------------ reporting

    def _rank_state(self, rank: int, complete: bool, reason: str) -> None:
        self._complete[rank] = complete
        precise = all(self._complete.values())
        if complete and not precise:
            return  # this rank is whole; the view is precise once every rank is
        if precise is not self.precise:
            self.precise = precise
            where = f"rank {rank}: " if self.spec.data_parallel_size > 1 else ""
            (log.info if precise else log.warning)("kv events of %s: view %s (%s%s)", self.instance,
                                                   "precise" if precise else "estimated", where, reason)
            self._put(KVViewChanged(self._clock(), self.instance, precise, where + reason))

    def _bad(self, bad: Bad) -> None:
        n = self.counts[bad.kind] = self.counts.get(bad.kind, 0) + 1
        if self._count is not None:
            self._count(self.instance, bad.kind)
        if n <= LOGGED or n % 1000 == 0:
            level = logging.INFO if bad.kind in ("gap", "restart", "skipped") else logging.WARNING
            log.log(level, "kv events of %s: %s #%d: %s", self.instance, bad.kind, n, bad.detail)


async def _decoded(payload: bytes, rank: int) -> Payload:
    """A large batch decoded in a worker thread (the event loop runs meanwhile: decoding
    65,536 blocks takes as long as applying them); a small one, or one that is no batch, as
    its bytes (the stream decodes it, and reports what is wrong with it)."""
    if len(payload) < LARGE_PAYLOAD_BYTES:
        return payload
    try:
        return await asyncio.to_thread(decode_batch, payload, rank)
    except WireError:
        return payload


async def close_all(subscribers: list[EngineSubscriber]) -> None:
    for s in subscribers:
        with contextlib.suppress(Exception):
            await s.aclose()
