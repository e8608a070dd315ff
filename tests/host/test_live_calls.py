"""The host's one record of a live call: its query from first sight until the query ends,
its engine request while one runs — a request outlives its query, and a superseded
attempt's end never ends the current one."""

from __future__ import annotations

import asyncio

from live_support import run, single

from flowserve.host.live_calls import LiveCalls
from flowserve.host.query import QueryHandle
from flowserve.types.work import LLMCall


def handle(query_id: int) -> QueryHandle:
    loop = asyncio.get_running_loop()
    return QueryHandle(query_id, "completion", single([1, 2]), None, "t", 0, None, loop.create_future(),
                       loop.create_future())


def call(call_id: int, query_id: int) -> LLMCall:
    return LLMCall(call_id, query_id, "n", "s", "completion", (1, 2, 3), 4, 4)


async def forever() -> None:
    await asyncio.Event().wait()


def test_a_call_belongs_to_its_query_until_the_query_ends() -> None:
    async def body() -> None:
        calls, h = LiveCalls(), handle(1)
        lc = calls.track(7, h)
        assert calls.track(7, None) is lc and calls.query_of(7) is h  # tracked once: its first sight says whose
        calls.query_ended(1)
        assert calls.get(7) is None and len(calls) == 0

    run(body())


def test_a_running_request_outlives_its_query_and_goes_when_it_ends() -> None:
    async def body() -> None:
        calls, h = LiveCalls(), handle(1)
        lc = calls.track(7, h)
        lc.attempt(call(7, 1), "a", 1.0)
        task = asyncio.ensure_future(forever())
        lc.run(task)
        calls.query_ended(1)
        assert calls.get(7) is lc and lc.query is None and lc.runs_on("a")
        calls.ended(lc, task)
        assert calls.get(7) is None
        task.cancel()

    run(body())


def test_the_end_of_a_superseded_attempt_leaves_the_current_one() -> None:
    async def body() -> None:
        calls, h = LiveCalls(), handle(1)
        lc = calls.track(7, h)
        lc.attempt(call(7, 1), "a", 1.0)
        first = asyncio.ensure_future(forever())
        lc.run(first)
        lc.attempt(call(7, 1), "b", 2.0)  # the core moved it to b (a went down) while a's request still ran
        second = asyncio.ensure_future(forever())
        lc.run(second)
        calls.ended(lc, first)
        assert lc.runs_on("b") and not lc.runs_on("a") and calls.get(7) is lc
        calls.ended(lc)  # cancelled by the core: the current request is aborted
        await asyncio.gather(second, return_exceptions=True)
        assert second.cancelled() and lc.task is None and calls.get(7) is lc  # its query still holds the record
        first.cancel()

    run(body())
