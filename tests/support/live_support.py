"""Helpers for the live tests: scripted engine backends and small constructors."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from flowserve.apps.single import SingleCall
from flowserve.engines.backend import CallOutcome, EngineError, EngineRequest
from flowserve.engines.tinymodel import TinyModel
from flowserve.host.driver import LiveDriver
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.fitted import FittedCostModel
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, WorkflowRef

T = TypeVar("T")
MODEL = "llama-3.1-8b"


def run(coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
    """Run one async test body on a fresh loop, bounded in time."""
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout_s)
    return asyncio.run(bounded())


def sim_spec(name: str, **kw: Any) -> InstanceSpec:
    return InstanceSpec(name, "A100-80G", MODEL, backend="sim", reports_capacity=True, **kw)


def ext_spec(name: str, **kw: Any) -> InstanceSpec:
    """An 'openai' instance whose engine is a ScriptedBackend in the tests."""
    return InstanceSpec(name, "A100-80G", MODEL, backend="openai", url=f"http://scripted/{name}", **kw)


def single(prompt: tuple[int, ...] | list[int], max_tokens: int = 4, model: str | None = None,
           params: dict[str, Any] | None = None) -> WorkflowRef:
    """A one-call completion query's workflow, as the gateway names it."""
    return WorkflowRef(SingleCall.name, ("completion", tuple(prompt), max_tokens, model, params))


class ScriptedBackend:
    """A test engine: answers with `answer(call)`, raises queued errors first, can be held
    (`gate`) so calls stay in flight until the test releases them."""

    def __init__(self, spec: InstanceSpec, answer: Callable[[LLMCall], str] | None = None) -> None:
        self.spec = spec
        self.tokenizer = None  # as a simulated engine: the gateway's word tokenizer
        self.answer = answer or (lambda call: " ".join(["ok"] * call.max_tokens))
        self.errors: list[EngineError] = []
        self.always_fail: EngineError | None = None
        self.healthy = True
        self.gate: asyncio.Event | None = None
        self.calls: list[LLMCall] = []
        self.requests: list[EngineRequest] = []
        self.cancelled: list[int] = []
        self.started = 0
        self.entered = asyncio.Event()  # set when a call reaches the engine

    def begin(self, call: LLMCall, req: EngineRequest) -> Awaitable[CallOutcome]:
        return asyncio.ensure_future(self._run(call, req))

    async def _run(self, call: LLMCall, req: EngineRequest) -> CallOutcome:
        self.calls.append(call)
        self.requests.append(req)
        self.started += 1
        self.entered.set()
        if self.errors:
            raise self.errors.pop(0)
        if self.always_fail is not None:
            raise self.always_fail
        try:
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(call.id)
            raise
        text = self.answer(call)
        sink = req.sink
        if sink is not None:
            for word in text.split(" "):
                sink.push(word + " ")
        return CallOutcome(output_tokens=max(1, len(text.split())), cached_tokens=0,
                           prompt_tokens=call.input_tokens, text=text, finish_reason="stop")

    async def probe(self) -> bool:
        return self.healthy

    async def aclose(self) -> None:
        pass


def scripted_driver(backends: dict[str, ScriptedBackend], **settings: Any) -> LiveDriver:
    specs = [b.spec for b in backends.values()]
    return compose_driver(specs, GatewaySettings(**settings), backend_factory=lambda spec, _d: backends[spec.name])


def tiny_profile(path: Path, model: TinyModel, slots: int, ctx: int = 4096) -> Path:
    """A hand-set profile of the tiny model on one CPU thread (orders of magnitude only:
    ~0.1 ms per prefilled token, ~2 ms per decode step)."""
    FittedCostModel(model.name, (1e-3, 2e-3, 1e-4, 1e-8, 1.5e-3, 1e-7), ctx, ctx, slots,
                    device="llama-server (1 thread)").save(path)
    return path


def poll_until(predicate: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.01) -> Any:
    """Poll `predicate` until it is truthy (returns its value); AssertionError naming
    `what` at the deadline. For state another process or thread changes."""
    import time

    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(every_s)
    return value
