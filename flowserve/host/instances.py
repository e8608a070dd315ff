"""The gateway's instances at run time: which engines join the routing, the admin
routes' additions and removals, and what they list.

An engine joins the routing (and tokenizes prompts) only once it answered a probe: at
start-up and when the administrator adds one, an engine that does not answer is
reported down to the core — listed, never routed to — while half-open probes continue
(`CallRunner.first_probe`); it comes up when it answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flowserve.core._kv import KVViewStatus
from flowserve.core.records import InstanceStatus
from flowserve.host.calls import CallRunner
from flowserve.types.events import Event, InstanceDown, InstanceUp
from flowserve.types.specs import InstanceSpec

if TYPE_CHECKING:
    from flowserve.core.scheduler import SchedulerCore

Control = Callable[[Callable[[float], Any]], Awaitable[Any]]  # run a function on the driver's loop


class LiveInstances:
    def __init__(self, core: SchedulerCore, runner: CallRunner, control: Control,
                 feed: Callable[[Event], None], specs: Sequence[InstanceSpec],
                 token_checks: Mapping[str, str]) -> None:
        """token_checks: each instance's start-up tokenization check (the KV feeds')."""
        self._core = core
        self._checks = token_checks
        self._runner = runner
        self._control = control
        self._feed = feed
        self.op_specs = {i.name: i for i in specs if i.kind != "llm"}  # non-LLM engines (their URLs)

    async def unanswered(self, specs: Sequence[InstanceSpec]) -> list[InstanceDown]:
        """Probe the real engines among `specs` at once: the InstanceDown of each that
        does not answer."""
        probes = [self._runner.first_probe(s.name) for s in specs if s.kind == "llm" and s.backend != "sim"]
        return [down for down in await asyncio.gather(*probes) if down is not None]

    async def add(self, spec: InstanceSpec) -> bool:
        """Add (or replace) an instance: InstanceUp to the core; an engine that does not
        answer yet is down at once (returns whether it is up)."""
        if spec.kind != "llm":
            self.op_specs[spec.name] = spec
            await self._control(lambda now: self._feed(InstanceUp(now, spec)))
            return True
        await self._control(lambda now: self._runner.add(spec))
        down = await self.unanswered([spec])

        def join(now: float) -> None:  # one step of the loop: nothing is routed to it between the two
            self._feed(InstanceUp(now, spec))
            for ev in down:
                self._feed(dataclasses.replace(ev, time=now))
        await self._control(join)
        return not down

    async def remove(self, name: str) -> None:
        """Take an instance out (KeyError if unknown): InstanceDown; the core moves its calls."""
        def apply(now: float) -> None:
            self._runner.check_removable(name)
            self._feed(InstanceDown(now, name, "removed by the administrator"))
            self._runner.remove(name)
        await self._control(apply)

    def status(self) -> list[InstanceStatus]:
        return [s for s in self._core.instance_status() if s.name not in self._runner.removed]

    def rows(self) -> list[dict[str, Any]]:
        views = {v.instance: v for v in self._core.kv_views()}
        checks = self._checks
        return [{"name": s.name, "model": s.spec.model, "gpu": s.spec.gpu, "backend": s.spec.backend,
                 "url": s.spec.url, "up": s.up, "circuit": self._runner.circuit_state(s.name), "queued": s.queued,
                 "running": s.running, "outstanding_s": s.outstanding_s, "dispatched": s.dispatched,
                 "completed": s.completed, **_view(views.get(s.name)),
                 **({"tokenization": checks[s.name]} if s.name in checks else {})} for s in self.status()]


def _view(v: KVViewStatus | None) -> dict[str, Any]:
    """Where an instance's prefix view comes from: its engine's cache events, or the estimate
    (`prefix_view_slots`: the prompts its /slots said it holds, topping the estimate up)."""
    if v is None:
        return {"prefix_view": "estimated", "prefix_view_reason": "the engine publishes no cache events"}
    row: dict[str, Any] = {"prefix_view": "precise" if v.precise else "estimated", "prefix_view_reason": v.reason}
    if v.slot_prompts is not None:
        row["prefix_view_slots"] = v.slot_prompts
    if v.blocks or v.slot_prompts is None:
        row["cached_blocks"] = v.blocks
    return row
