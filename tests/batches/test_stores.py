"""Both stores keep the same promises: a result recorded twice counts once and keeps the
first; a tenant's open batches stop at its limit; a status moves only along the batch's
life, from the status it has; a tenant's lists hold its own, newest first; a replica runs
only the batches it holds the lease of."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import pytest
from live_support import run

from flowserve.batches.records import BadTransition, BatchRecord, BatchStatus, FileRecord, LineResult, RequestCounts
from flowserve.batches.store import BatchStore

OpenStore = Callable[[], Awaitable[tuple[BatchStore, Callable[[], Awaitable[None]]]]]


def batch(i: int, tenant: str = "acme") -> BatchRecord:
    return BatchRecord(f"batch_{i}", tenant, "file-1", "/v1/completions", "24h", created_at=100 + i,
                       expires_at=100 + i + 86_400)


def test_a_result_counts_once_and_the_first_stays(open_store: OpenStore) -> None:
    async def body() -> None:
        store, close = await open_store()
        try:
            await store.add_batch(batch(1), 10)
            await store.move("batch_1", BatchStatus.IN_PROGRESS, 200, total=3)
            first = LineResult(1, "a", 200, "q-1", {"x": 1})
            assert await store.record("batch_1", [first, LineResult(2, "b", 400, "q-2", {})]) == RequestCounts(3, 1, 1)
            again = await store.record("batch_1", [dataclasses.replace(first, request_id="q-again"),
                                                   LineResult(3, "c", None, error={"code": "e", "message": "m"})])
            assert again == RequestCounts(3, 1, 2)
            assert [r.request_id for r in await store.results("batch_1")] == ["q-1", "q-2", None]
            assert await store.recorded("batch_1") == {1, 2, 3}
            rec = await store.batch("batch_1")
            assert rec is not None and rec.counts == again and rec.in_progress_at == 200
        finally:
            await close()
    run(body())


def test_open_batches_stop_at_the_limit_and_moves_follow_the_life(open_store: OpenStore) -> None:
    async def body() -> None:
        store, close = await open_store()
        try:
            assert await store.add_batch(batch(1), 2) and await store.add_batch(batch(2), 2)
            assert not await store.add_batch(batch(3), 2)
            assert await store.add_batch(batch(4, "globex"), 2)  # another tenant's limit
            with pytest.raises(BadTransition):
                await store.move("batch_1", BatchStatus.COMPLETED, 300)
            await store.move("batch_1", BatchStatus.CANCELLING, 300)
            done = await store.move("batch_1", BatchStatus.CANCELLED, 301, output_file_id="file-x")
            assert (done.status, done.cancelling_at, done.cancelled_at, done.output_file_id) == \
                (BatchStatus.CANCELLED, 300, 301, "file-x")
            assert await store.add_batch(batch(3), 2)  # an ended batch frees its place
            assert [b.id for b in await store.batches("acme")] == ["batch_3", "batch_2", "batch_1"]
            with pytest.raises(KeyError):
                await store.move("batch_9", BatchStatus.IN_PROGRESS, 1)
            await store.add_file(FileRecord("file-1", "acme", "in.jsonl", "batch", 10, 1, 5))
            await store.add_file(FileRecord("file-2", "acme", "b.jsonl", "batch", 10, 1, 6))
            assert [f.id for f in await store.files("acme")] == ["file-2", "file-1"]
            assert await store.files("globex") == [] and await store.file("file-3") is None
        finally:
            await close()
    run(body())


def test_leases(open_store: OpenStore) -> None:
    async def body() -> None:
        store, close = await open_store()
        try:
            await store.add_batch(batch(1), 5)
            await store.add_batch(batch(2), 5)
            mine = [b.id for b in await store.claim("a", 30.0)]
            assert mine == ["batch_1", "batch_2"]
            theirs = [b.id for b in await store.claim("b", 30.0)]
            if type(store).__name__ == "SharedBatches":  # a replica waits for the lease; one process owns all
                assert theirs == []
                await store.release("a", "batch_2")
                assert [b.id for b in await store.claim("b", 30.0)] == ["batch_2"]
            else:
                assert theirs == mine
        finally:
            await close()
    run(body())
