"""A simulated engine's LoRA slots, as vLLM's scheduler and LoRA manager keep them.

* A running batch holds the adapters of its requests in at most `max_loras` GPU slots:
  a waiting request whose adapter is not among the batch's while `max_loras` distinct
  adapters already run is skipped, and requests behind it may go first (vLLM's
  scheduler: `len(scheduled_loras) == max_loras` → skip, keep scanning the queue).
* An adapter not in a slot is loaded into a free one or into the least recently used
  slot no running request needs; the engine's next iteration waits `load_s` seconds per
  adapter loaded (vLLM activates adapters synchronously before the model runs).

Requests that name the base model (no adapter) are never held back. Pure bookkeeping:
the engine (`flowserve.sim.engine`) asks `admissible`, reports `admitted` and `released`,
and adds `owed` seconds to its next iteration, then calls `paid`.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

from flowserve.types.specs import LoraSpec
from flowserve.types.work import LLMCall


class AdapterSlots:
    def __init__(self, spec: LoraSpec) -> None:
        self.spec = spec
        self.resident: OrderedDict[str, None] = OrderedDict()  # in a GPU slot, least recently used first
        self.running: Counter[str] = Counter()  # admitted requests per adapter
        self._pinned: dict[int, str] = {}  # call id → its adapter, while admitted
        self.owed = 0.0  # load seconds the next iteration waits for
        self.loads = 0  # adapters loaded so far

    def admissible(self, call: LLMCall) -> bool:
        """Whether the batch can take the call now: no adapter, one it runs, or a slot left."""
        adapter = self.spec.adapter_of(call.model)
        return adapter is None or adapter in self.running or len(self.running) < self.spec.max_loras

    def admitted(self, call: LLMCall) -> None:
        """The call joins the batch (it was admissible): its adapter is loaded if it is not in a slot."""
        adapter = self.spec.adapter_of(call.model)
        if adapter is None:
            return
        if adapter not in self.resident:
            if len(self.resident) >= self.spec.max_loras:
                # an admissible call leaves a slot no running request needs
                victim = next(a for a in self.resident if a not in self.running)
                del self.resident[victim]
            self.resident[adapter] = None
            self.owed += self.spec.load_s
            self.loads += 1
        self.resident.move_to_end(adapter)
        self.running[adapter] += 1
        self._pinned[call.id] = adapter

    def released(self, call_id: int) -> None:
        """The call left the batch (finished, preempted, aborted): its adapter stays in its slot."""
        adapter = self._pinned.pop(call_id, None)
        if adapter is not None:
            self.running[adapter] -= 1
            if not self.running[adapter]:
                del self.running[adapter]

    def paid(self) -> None:
        """An iteration that waited for the loads owed has run."""
        self.owed = 0.0
