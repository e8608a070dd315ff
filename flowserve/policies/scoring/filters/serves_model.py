"""`serves_model`: instances that serve the call's model or LoRA adapter (case-insensitive;
a call that names none goes anywhere).

    keep_i = the call names no model, or the call's model is i's base model, one of its
             other served names (`models:`) or one of its LoRA adapters (`lora_adapters:`)

The core hands a policy only instances serving the call's model; in a profile this
filter states it. An adapter is a model name, as in vLLM's API: an instance that lists
it can load it (`lora_affinity` scores whether it must).
"""

from __future__ import annotations

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter


class ServesModel(Filter):
    name = "serves_model"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return inst.serves(d.call.node.model)
