"""The subscriber against a real pyzmq publisher on 127.0.0.1: both layouts, two
data-parallel ranks, gaps, replays, clears, a late join, restarts and bad input; the
events go into a real scheduler core, whose view is checked."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from helpers import live_spec, make_core
from live_support import run

from flowserve.engines.llamacpp_server import free_port
from flowserve.kvevents.publisher import KVPublisher
from flowserve.kvevents.subscriber import SLICE_BLOCKS, EngineSubscriber
from flowserve.types.kv import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvents,
    KVEventsSpec,
    KVViewChanged,
)

P = tuple(range(500, 564))  # four blocks of 16


def blocks(first: int, n: int, parent: int | None = None, rank: int = 0) -> BlockStored:
    """Blocks first..first+n-1 of P (engine hashes 1000+i)."""
    return BlockStored(rank, tuple(1000 + i for i in range(first, first + n)), parent,
                       P[16 * first:16 * (first + n)], 16)


def free_run(n: int, avoid: range = range(0)) -> int:
    """The first of `n` consecutive free ports (the engines' ranks publish on port + rank)
    outside `avoid`: a free port's neighbour may be another socket's."""
    while True:
        first = free_port()
        ports = range(first, first + n)
        if set(ports).isdisjoint(avoid) and all(_bindable(p) for p in ports[1:]):
            return first


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Harness:
    """A core fed by the subscriber; waits on conditions, never on time."""

    def __init__(self, ranks: int, replay: bool, retry_s: float = 30.0, replay_timeout_s: float = 2.0) -> None:
        port = free_run(ranks)
        rport = free_run(ranks, avoid=range(port, port + ranks))
        self.ends = [(f"tcp://127.0.0.1:{port + r}", f"tcp://127.0.0.1:{rport + r}" if replay else None)
                     for r in range(ranks)]
        spec = KVEventsSpec(self.ends[0][0], self.ends[0][1], "kv", 16, ranks)
        self.core = make_core([dataclasses.replace(live_spec("a"), kv_events=spec)], "prefix_affinity")
        self.views: list[KVViewChanged] = []
        self.trace: list[object] = []  # the KVCacheEvents put, in order (and what a test adds between)
        self._changed = asyncio.Condition()
        self.sub = EngineSubscriber("a", spec, self._put, lambda: 0.0, retry_s=retry_s,
                                    replay_timeout_s=replay_timeout_s)

    def _put(self, ev: Any) -> None:
        if isinstance(ev, KVCacheEvents):
            self.trace.append(ev)
        self.core.handle(ev)
        if isinstance(ev, KVViewChanged):
            self.views.append(ev)

        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()
        asyncio.get_running_loop().create_task(notify())

    async def until(self, what: Callable[[], bool], timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s), self._changed:
            await self._changed.wait_for(what)

    def hit(self) -> int:
        return self.core.prefix_hit(P, "a")

    def precise(self) -> bool:
        return self.core.kv_views()[0].precise


@asynccontextmanager
async def setup(ranks: int = 1, replay: bool = True, layouts: tuple[str, ...] = ("array", "map"), buffer: int = 100,
                **kw: Any) -> AsyncIterator[tuple[Harness, list[KVPublisher]]]:
    """Rank r publishes in layouts[r]; rank 1 answers replays as vLLM before 0.32 did (no topic frame)."""
    h = Harness(ranks, replay, **kw)
    pubs = [KVPublisher(e, r, "kv", buffer, layouts[i % len(layouts)], rank=i,  # type: ignore[arg-type]
                        replay_topic=i % 2 == 0) for i, (e, r) in enumerate(h.ends)]
    for p in pubs:
        p.start()
    try:
        yield h, pubs
    finally:
        await h.sub.aclose()
        for p in pubs:
            await p.aclose()


def test_two_ranks_in_both_layouts_with_a_replay_at_start() -> None:
    async def go() -> None:
        async with setup(ranks=2) as (h, (p0, p1)):
            await p0.publish([blocks(0, 2)])  # before anyone listens: only the replay has it
            h.sub.start()
            await h.until(h.precise)
            assert h.hit() == 32 and p0.replays == [0] and p1.replays == [0]
            await p1.subscribed()
            await p1.publish([blocks(0, 4, rank=1)])  # keyed layout, rank 1 holds more
            await h.until(lambda: h.hit() == 64)
            await p1.publish([AllBlocksCleared(1)])  # rank 1 cleared: rank 0's blocks remain
            await h.until(lambda: h.hit() == 32)
            p1.skip(1, [blocks(0, 3, rank=1)])  # a gap on rank 1, replayed in the older frame layout
            await p1.publish([])
            await h.until(lambda: h.hit() == 48)
            assert p1.replays == [0, 2]
            assert h.core.kv_views()[0].blocks == 3 and h.sub.counts == {"gap": 1} and h.precise()
    run(go())


def test_a_gap_is_replayed_and_the_view_stays_precise() -> None:
    async def go() -> None:
        async with setup() as (h, (p,)):
            h.sub.start()
            await h.until(h.precise)
            await p.subscribed()
            await p.publish([blocks(0, 1)])
            p.skip(1, [blocks(1, 1, parent=1000)])  # lost on the wire, kept in the replay buffer
            p.skip(1, [BlockRemoved(0, (1001,))])
            await p.publish([blocks(1, 3, parent=1000)])
            await h.until(lambda: h.hit() == 64)
            assert p.replays == [0, 1] and h.sub.counts == {"gap": 1} and h.precise()
            assert h.views == [h.views[0]]  # never estimated
    run(go())


def test_an_unanswered_replay_makes_it_estimated_until_a_retry_fills_the_hole() -> None:
    async def go() -> None:
        async with setup(retry_s=0.05, replay_timeout_s=0.3) as (h, (p,)):
            h.sub.start()
            await h.until(h.precise)
            await p.subscribed()
            await p.publish([blocks(0, 1)])
            p.answer = False
            p.skip(2, [blocks(1, 1, parent=1000)])
            await p.publish([blocks(2, 1, parent=1001)])
            await h.until(lambda: not h.precise())
            assert "failed: no answer within 0.3 s" in h.core.kv_views()[0].reason
            assert h.hit() == 16  # the block after the hole has no known parent: an orphan
            p.answer = True
            await h.until(h.precise)
            assert h.hit() == 48 and h.views[-1].reason == "replayed from seq 1"
    run(go())


def test_a_late_join_is_estimated_until_the_engine_clears() -> None:
    async def go() -> None:
        async with setup(buffer=3) as (h, (p,)):
            for i in range(6):  # seq 0..5; the buffer keeps 3..5
                await p.publish([blocks(0, 1)] if i == 0 else [])
            h.sub.start()
            await h.until(lambda: h.views != [] and not h.precise())
            assert "no longer holds seq 0" in h.core.kv_views()[0].reason
            await p.subscribed()
            await p.publish([AllBlocksCleared(0)])
            await h.until(h.precise)
            assert h.sub.counts == {"replay_short": 1}
    run(go())


def test_without_replay_a_gap_is_estimated_and_a_restart_resyncs() -> None:
    async def go() -> None:
        async with setup(replay=False) as (h, (p,)):
            h.sub.start()
            await p.subscribed()
            await p.publish([blocks(0, 2)])
            await h.until(lambda: h.precise() and h.hit() == 32)
            p.skip(1)
            await p.publish([])
            await h.until(lambda: not h.precise())
            p.restart()  # seq 0 again: an empty cache
            await p.publish([blocks(0, 1)])
            await h.until(lambda: h.precise() and h.hit() == 16)
            assert h.sub.counts == {"gap": 1, "restart": 1}
    run(go())


@pytest.mark.parametrize("layout", ["array", "map"])
def test_bad_input_is_counted_and_the_stream_goes_on(layout: str) -> None:
    async def go() -> None:
        async with setup(replay=False, layouts=(layout,)) as (h, (p,)):
            h.sub.start()
            await p.subscribed()
            await p.publish([blocks(0, 1)])
            await p.publish([])
            await p.send_raw([b"kv", b"\x00" * 8])  # two frames
            await p.send_raw([b"kv", b"\x01", b"x"])  # a seq that is not 8 bytes
            await p.send_raw([b"kv", (1).to_bytes(8, "big"), b"\x91\x01"])  # seq going backwards
            await p.send_payload(b"\xc1\xc1 not msgpack")  # seq 2: malformed (a hole no replay fills)
            await p.send_payload(b"\x92\x00\x91\x92\xa7Unknown\x01")  # seq 3: an unknown event
            await p.publish([blocks(1, 1, parent=1000)])  # seq 4
            await h.until(lambda: h.hit() == 32)
            assert h.sub.counts == {"frames": 2, "stale": 1, "malformed": 1, "skipped": 1}
            assert not h.precise() and "unreadable" in h.core.kv_views()[0].reason
    run(go())


def test_a_huge_batch_is_applied_in_slices_with_the_loop_free_between_them() -> None:
    """Issue 44 item 6: one batch of thousands of blocks went to the core in one turn of the
    loop. Now a slice of at most SLICE_BLOCKS blocks per turn, a long stored run split with
    each piece under the last one: another coroutine runs between every two slices (counted,
    not timed), and the view is the same as if applied at once."""
    n = 2 * SLICE_BLOCKS + 100
    tokens = tuple(range(10_000, 10_000 + 16 * n))
    chain = BlockStored(0, tuple(range(1, n + 1)), None, tokens, 16)

    async def go() -> None:
        async with setup(layouts=("array",)) as (h, (p,)):
            log = h.trace
            h.sub.start()
            await h.until(h.precise)
            await p.subscribed()
            ticking = True

            async def ticker() -> None:
                while ticking:
                    log.append("tick")
                    await asyncio.sleep(0)

            other = asyncio.get_running_loop().create_task(ticker())
            log.clear()
            await p.publish([chain, BlockRemoved(0, (n,))])
            await h.until(lambda: h.core.kv_views()[0].blocks == n - 1)
            ticking = False
            await other
            events = [e for e in log if isinstance(e, KVCacheEvents)]
            assert len(events) == 3  # 1024 + 1024 + 101 blocks (the last with the removal)
            for ev in events:
                assert sum(len(c.block_hashes) for c in ev.changes) <= SLICE_BLOCKS
            at = [i for i, e in enumerate(log) if isinstance(e, KVCacheEvents)]
            between = [log[i + 1:j] for i, j in itertools.pairwise(at)]
            assert all("tick" in part for part in between), [len(part) for part in between]
            assert h.core.prefix_hit(tokens, "a") == 16 * (n - 1)  # the whole run but its removed last block
    run(go())
