"""`lora_affinity`: instances where the call's LoRA adapter is already in use, then those
with room to load it (llm-d/GIE's lora-affinity-scorer, `pkg/epp/scheduling/framework/
plugins/scorer/lora_affinity.go`).

    score_i = 1    the adapter is active on i (a call running there uses it)
              0.8  |active_i| + |waiting_i| < max_loras_i (i has room to load one more)
              0.6  the adapter is waiting on i (a call queued there uses it)
              0    otherwise (i must first finish an adapter's calls)          ∈ {0, 0.6, 0.8, 1}

llm-d reads `active` and `waiting` from vLLM's `vllm:lora_requests_info` metric (the
adapters of the requests it runs and holds waiting); the core reads them from the calls
it sent to i's engine (`running`) and those queued for i (`queue`). A call that names
no adapter (the base model) scores 1 everywhere, where llm-d would score it as an
adapter that is never active: it needs no slot.
"""

from __future__ import annotations

from collections.abc import Iterable

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Scorer
from flowserve.types.specs import LoraSpec


def lora_affinity_score(active: bool, waiting: bool, in_use: int, max_loras: int) -> float:
    """llm-d's lora-affinity-scorer: 1 active, 0.8 room for one more, 0.6 waiting, 0."""
    if active:
        return 1.0
    if in_use < max_loras:
        return 0.8
    if waiting:
        return 0.6
    return 0.0


def adapters_in(models: Iterable[str | None], lora: LoraSpec) -> set[str]:
    """The distinct adapters some calls' models name (base-model calls left out)."""
    return {a for a in map(lora.adapter_of, models) if a is not None}


def instance_score(inst: InstanceState, model: str | None) -> float:
    lora = inst.spec.engine.lora
    adapter = lora.adapter_of(model) if lora is not None else None
    if adapter is None or lora is None:
        return 1.0
    active = adapters_in((c.node.model for c in inst.running.values()), lora)
    waiting = adapters_in((c.node.model for c in inst.queue), lora)
    return lora_affinity_score(adapter in active, adapter in waiting, len(active) + len(waiting), lora.max_loras)


class LoraAffinity(Scorer):
    name = "lora_affinity"

    def score(self, d: Decision) -> list[float]:
        model = d.call.node.model
        return [instance_score(i, model) for i in d.candidates]
