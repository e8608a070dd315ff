"""The picker's engine backend: from its pick on, a request is the proxy's — its sink is
committed (a typed field, not a faked streamed token), so a failure the proxy reports is
final: never retried on the instance, never re-dispatched to another."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from live_support import ext_spec, run, scripted_driver, single

from flowserve.engines.backend import CallOutcome, EngineError, EngineRequest
from flowserve.picker.pick import Pick
from flowserve.types.work import LLMCall


def test_a_pick_commits_its_request_to_the_proxy() -> None:
    async def body() -> None:
        pick = Pick()
        assert not pick.committed and pick.sent == 0
        call = LLMCall(1, 1, "n", "s", "w", (1, 2), 4, 4)
        outcome = pick.route(call, "a", "127.0.0.1:8001")
        assert pick.committed and pick.sent == 0 and await pick.chosen == ("a", "127.0.0.1:8001")
        assert "proxy" in pick.committed_how
        again = pick.route(call, "b", "127.0.0.1:8002")  # sent again: the proxy already forwarded it
        assert isinstance(again.exception(), EngineError) and not again.exception().retryable
        outcome.cancel()

    run(body())


class ProxyLike:
    """Hands each call to the proxy as `PickerBackend` does; the proxy then reports a
    retryable engine error (a 503 from the engine)."""

    def __init__(self, name: str) -> None:
        self.spec = ext_spec(name)
        self.tokenizer = None
        self.begun: list[int] = []

    def begin(self, call: LLMCall, req: EngineRequest) -> Awaitable[CallOutcome]:
        self.begun.append(call.id)
        assert isinstance(req.sink, Pick)
        outcome = req.sink.route(call, self.spec.name, f"127.0.0.1:{8000 + len(self.begun)}")
        req.sink.fail(EngineError("engine error 503", retryable=True, status=503))
        return outcome

    async def probe(self) -> bool:
        return True

    async def aclose(self) -> None:
        pass


def test_a_failure_after_the_pick_is_final() -> None:
    engines = {"a": ProxyLike("a"), "b": ProxyLike("b")}

    async def body() -> None:
        d = scripted_driver(engines)  # type: ignore[arg-type]
        await d.start()
        try:
            h = await d.submit(d.new_query("completion", single([1, 2, 3]), sink=Pick()))
            r = await asyncio.wait_for(h.done, 10)
        finally:
            await d.shutdown()
        assert not r.completed and "after the proxy took the request" in (r.reason or "")

    run(body())
    assert sorted(len(e.begun) for e in engines.values()) == [0, 1]  # one attempt, on one instance
