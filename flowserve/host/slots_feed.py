"""Topping the estimate up from what an engine without cache events says its slots hold.

llama.cpp publishes no KV-cache events, so the gateway's view of its cache is an estimate
(`CacheEstimate`): what it routed there, less what an LRU model of the engine evicted. A
llama-server tells more on `GET /slots`: each slot's last prompt (`llamacpp_slots`). Every
`gateway.slots_poll_s` seconds a `SlotsReader` reads it and hands the core the prompts of
the slots that changed (`SlotsResident`, tokenized as the gateway tokenizes its own
prompts), and the estimate learns them too, so that it forgets them in its LRU order: what
other clients sent, or what the estimate had evicted too early, becomes routable. An engine
that answers 404 or 501 (vLLM, a llama-server with `--no-slots`), or whose slots name no
prompt (llama-server without `LLAMA_SERVER_SLOTS_DEBUG=1`), is not asked again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from flowserve.engines.answer import EngineError
from flowserve.engines.llamacpp_slots import SlotsError, SlotState, parse_slots
from flowserve.engines.openai_backend import OpenAIBackend
from flowserve.types.kv import SlotsResident
from flowserve.types.work import Tokens

log = logging.getLogger("flowserve.gateway")
NOT_SERVED = (404, 501)  # no /slots here (vLLM, SGLang) or switched off (`--no-slots`)


def changed_prompts(slots: list[SlotState], seen: dict[int, str]) -> list[str]:
    """The prompts of slots whose prompt differs from the last read (`seen` is updated)."""
    out = []
    for s in slots:
        if s.prompt is not None and seen.get(s.id) != s.prompt:
            seen[s.id] = s.prompt
            out.append(s.prompt)
    return out


def names_no_prompt(slots: list[SlotState]) -> bool:
    """Whether the slots ran prompts but name none: a build that tells sizes only."""
    return any(s.prompt_tokens for s in slots) and all(s.prompt is None for s in slots)


class SlotsReader:
    def __init__(self, name: str, backend: OpenAIBackend, text: Callable[[str], Awaitable[list[int]]],
                 learnt: Callable[[SlotsResident], None], clock: Callable[[], float], interval_s: float) -> None:
        """text: the gateway's tokenization of a text for this instance's model; learnt:
        where the prompts go (the estimate, then the core)."""
        self.name = name
        self._backend = backend
        self._text = text
        self._learnt = learnt
        self._clock = clock
        self._interval = interval_s
        self._seen: dict[int, str] = {}
        self.state = "not read yet"
        self.reads = 0
        self.prompts = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"slots {self.name}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while await self.read_once():
            await asyncio.sleep(self._interval)  # the poll period, not a wait for something

    async def read_once(self) -> bool:
        """One read; False once the engine is known not to tell (then it is not asked again)."""
        try:
            body = await (await self._backend.client()).slots()
            slots = parse_slots(body)
        except EngineError as e:
            if e.status in NOT_SERVED:
                self.state = f"not served (HTTP {e.status}): not asked again"
                return False
            self.state = f"read failed, trying again: {e}"  # down or busy: the next period asks again
            return True
        except SlotsError as e:
            self.state = f"unreadable answer, trying again: {e}"
            log.warning("instance %s: /slots: %s", self.name, e)
            return True
        if names_no_prompt(slots):
            self.state = ("slots name no prompt (run llama-server with LLAMA_SERVER_SLOTS_DEBUG=1 to have them): "
                          "not asked again")
            return False
        self.reads += 1
        seen = dict(self._seen)
        try:
            prompts: list[Tokens] = [tuple(await self._text(p)) for p in changed_prompts(slots, seen)]
        except EngineError as e:
            self.state = f"tokenizing a slot's prompt failed, trying again: {e}"
            return True
        self._seen = seen
        self.state = "topping up the estimate"
        prompts = [p for p in prompts if p]
        if prompts:
            self.prompts += len(prompts)
            self._learnt(SlotsResident(self._clock(), self.name, tuple(prompts)))
        return True
