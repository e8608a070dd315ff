"""A KV-event publisher with vLLM's protocol (pyzmq, asyncio): a PUB socket sending
`[topic, seq (8 bytes, big-endian), payload]` and a ROUTER answering replay requests from
a buffer of the latest batches (vLLM's `ZmqEventPublisher`, `buffer_steps` = 10,000):
`[topic, seq, payload]` per batch then `[b"", -1, b""]` as vLLM 0.32 does, or without the
topic frame as earlier versions did (`replay_topic=False`).

flowserve's tests and `bench kv-events` publish through it, one per data-parallel rank
(on `endpoint`'s port + rank, as vLLM binds). For fault injection it can skip sequence
numbers (`skip`), send raw frames (`send_raw`) and stop answering replays (`answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence

import zmq
import zmq.asyncio

from flowserve.kvevents.subscriber import END_SEQ
from flowserve.kvevents.wire import Layout, encode_batch
from flowserve.types.kv import CacheChange

BUFFER_STEPS = 10_000


class KVPublisher:
    def __init__(self, endpoint: str, replay: str | None = None, topic: str = "", buffer_steps: int = BUFFER_STEPS,
                 layout: Layout = "array", rank: int | None = None, replay_topic: bool = True) -> None:
        """endpoint/replay: where to bind (tcp://127.0.0.1:PORT); rank: written into each batch."""
        self._ctx = zmq.asyncio.Context.instance()  # the process's own: see Subscriber
        self.pub = self._ctx.socket(zmq.XPUB)  # a PUB that also sees subscriptions (`subscribed`)
        self.pub.setsockopt(zmq.SNDHWM, 1_000_000)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.bind(endpoint)
        self.router: zmq.asyncio.Socket | None = None
        if replay is not None:
            self.router = self._ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            self.router.bind(replay)
        self.topic = topic.encode()
        self.layout = layout
        self.rank = rank
        self.seq = 0
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self.replay_topic = replay_topic
        self.answer = True  # False: replay requests go unanswered (a hung engine)
        self.replays: list[int] = []  # start seqs asked for
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.router is not None:
            self._task = asyncio.create_task(self._serve())

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.pub.close(linger=0)
        if self.router is not None:
            self.router.close(linger=0)

    # ------------------------------------------------------------------ publishing

    async def publish(self, changes: Sequence[CacheChange], ts: float = 0.0) -> int:
        """One batch with the next seq; returns its seq."""
        return await self.send_payload(encode_batch(ts, changes, self.layout, self.rank))

    async def send_payload(self, payload: bytes) -> int:
        seq = self.seq
        self.seq += 1
        self.buffer.append((seq, payload))
        await self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])
        return seq

    async def subscribed(self, timeout_s: float = 10.0) -> None:
        """Wait until a subscriber's subscription reached the socket (PUB drops what it
        sends before: ZMQ's slow joiner)."""
        async with asyncio.timeout(timeout_s):
            while True:
                msg = await self.pub.recv()
                if msg[:1] == b"\x01":
                    return

    def skip(self, n: int, changes: Sequence[CacheChange] = ()) -> None:
        """Lose the next `n` batches on the wire (still buffered for replay): a gap."""
        for _ in range(n):
            self.buffer.append((self.seq, encode_batch(0.0, changes, self.layout, self.rank)))
            self.seq += 1

    async def send_raw(self, frames: list[bytes]) -> None:
        await self.pub.send_multipart(frames)

    def restart(self) -> None:
        """The engine restarted: its sequence starts again at 0 and its buffer is empty."""
        self.seq = 0
        self.buffer.clear()

    # ------------------------------------------------------------------ replay

    async def _serve(self) -> None:
        assert self.router is not None
        while True:
            frames = await self.router.recv_multipart()
            if len(frames) != 3:
                continue  # vLLM logs and ignores these too
            client, _, start_bytes = frames
            start = int.from_bytes(start_bytes, "big", signed=True)
            self.replays.append(start)
            if not self.answer:
                continue
            topic = [self.topic] if self.replay_topic else []
            for seq, payload in list(self.buffer):
                if seq >= start:
                    await self.router.send_multipart([client, b"", *topic, seq.to_bytes(8, "big"), payload])
            end = [b""] if self.replay_topic else []
            await self.router.send_multipart([client, b"", *end, END_SEQ.to_bytes(8, "big", signed=True), b""])
