"""`serves_model`: instances that serve the call's model (case-insensitive; a call that
names none goes anywhere).

    keep_i = the call names no model, or i's model is the call's

The core hands a policy only instances serving the call's model; in a profile this
filter states it, and is where serving LoRA adapters extends it.
"""

from __future__ import annotations

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter


class ServesModel(Filter):
    name = "serves_model"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return inst.serves(d.call.node.model)
