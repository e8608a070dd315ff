"""The gateway's cache of engine tokenizations: repeated texts skip the round trip,
concurrent identical ones share one, failures are not remembered."""

from __future__ import annotations

import asyncio

import pytest
from live_support import run

from flowserve.engines.backend import EngineError
from flowserve.host.routing_tokens import RecentTokenizations


def test_repeated_and_concurrent_texts_ask_the_engine_once() -> None:
    async def body() -> None:
        cache = RecentTokenizations(size=2)
        asked: list[str] = []
        release = asyncio.Event()

        def ask(text: str):
            async def go() -> list[int]:
                asked.append(text)
                await release.wait()
                return [len(text), 7]
            return go

        first = asyncio.gather(*(cache.get(("m", "abc"), ask("abc")) for _ in range(5)))
        await asyncio.sleep(0)
        release.set()
        assert await first == [[3, 7]] * 5 and asked == ["abc"]
        out = await cache.get(("m", "abc"), ask("abc"))
        out.append(99)  # callers own their copy
        assert await cache.get(("m", "abc"), ask("abc")) == [3, 7] and asked == ["abc"]
        await cache.get(("m", "d"), ask("d"))
        await cache.get(("m", "e"), ask("e"))  # evicts the least recent ("abc")
        await cache.get(("m", "abc"), ask("abc"))
        assert asked == ["abc", "d", "e", "abc"]

        async def fail() -> list[int]:
            raise EngineError("down", retryable=True)

        with pytest.raises(EngineError):
            await cache.get(("m", "x"), fail)
        assert await cache.get(("m", "x"), ask("x")) == [1, 7]

    run(body())
