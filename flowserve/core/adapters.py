"""What the router believes of an instance's LoRA adapters: which are in its GPU slots.

An engine that serves LoRA adapters (`LoraSpec`) keeps at most `max_loras` of them in GPU
slots and loads one that is not there before its request runs, into the least recently
used slot (vLLM's LRU of active adapters). Few engines report which adapters they hold,
so the core keeps its own estimate, as it does of their prefix caches: every call it
sends to the engine uses its adapter there, most recently; beyond `max_loras` the least
recently used one is taken to be gone. Scorers read it (`lora_affinity`, `adapter_load`);
the engine's truth is the simulator's (`flowserve.sim.adapter_slots`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from flowserve.types.specs import LoraSpec


class AdapterBook:
    """The adapters an instance is believed to hold, least recently used first."""

    __slots__ = ("_held", "spec")

    def __init__(self, spec: LoraSpec) -> None:
        self.spec = spec
        self._held: OrderedDict[str, None] = OrderedDict()

    def used(self, model: str | None) -> None:
        """A call naming `model` was sent to the engine: its adapter (if any) is held, most recently."""
        adapter = self.spec.adapter_of(model)
        if adapter is None:
            return
        self._held[adapter] = None
        self._held.move_to_end(adapter)
        while len(self._held) > self.spec.max_loras:
            self._held.popitem(last=False)

    def holds(self, adapter: str) -> bool:
        return adapter in self._held

    @property
    def held(self) -> tuple[str, ...]:
        """The held adapters, least recently used first."""
        return tuple(self._held)


def adapters_in(models: Iterable[str | None], spec: LoraSpec) -> set[str]:
    """The distinct adapters a set of calls' models name (their base-model calls left out)."""
    out = set()
    for m in models:
        a = spec.adapter_of(m)
        if a is not None:
            out.add(a)
    return out
