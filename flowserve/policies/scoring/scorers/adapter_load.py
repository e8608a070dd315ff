"""`adapter_load`: the seconds the call's LoRA adapter costs on each instance before the
call can run there, and, with `stall_running`, what loading it costs the calls running
there (flowserve's; a cost in seconds, added to `finish` on one scale).

    cost_i = (1 + r_i·[stall_running]) · load_i + slot_wait_i        ≥ 0; 0 for a base-model call
    load_i = i's `lora_load_s` if the router believes i does not hold the adapter, else 0
    slot_wait_i = min over the adapters b running on i of (the latest predicted end of b's
                  running calls − now), if i's running calls already use `max_loras`
                  adapters other than the call's; else 0

`r_i`: the calls running on i, whose iteration waits while the adapter loads (vLLM loads
adapters before the step that needs them). What i holds is the core's estimate
(`flowserve.core.adapters`: the adapters of the calls it sent there, the last
`max_loras`); a running call's predicted end is its release plus its t_comp. The
engine frees a slot when the last running call of one of its adapters ends.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import CostScorer, Decision


def adapter_cost(load_s: float, held: bool, running: int, stall_running: bool, slot_wait_s: float) -> float:
    """cost_i of the module docstring."""
    load = 0.0 if held else load_s
    return (1 + (running if stall_running else 0)) * load + slot_wait_s


def slot_wait(inst: InstanceState, adapter: str, now: float) -> float:
    """Seconds until i's batch has a slot for `adapter` (the module docstring's slot_wait_i)."""
    lora = inst.spec.engine.lora
    assert lora is not None
    ends: dict[str, float] = {}
    for c in inst.running.values():
        b = lora.adapter_of(c.node.model)
        if b is not None:
            end = (c.released if c.released is not None else now) + c.t_comp
            ends[b] = max(ends.get(b, end), end)
    if adapter in ends or len(ends) < lora.max_loras:
        return 0.0
    return max(min(ends.values()) - now, 0.0)


class AdapterLoad(CostScorer):
    name = "adapter_load"
    unit = "s"

    def __init__(self, stall_running: Annotated[bool, Help(
            "count the wait of the calls running on the instance while the adapter loads (its iteration waits "
            "for the load)")] = True) -> None:
        self.stall_running = stall_running

    def cost(self, d: Decision) -> list[float]:
        model, now = d.call.node.model, d.view.now
        out = []
        for inst in d.candidates:
            lora, book = inst.spec.engine.lora, inst.adapters
            adapter = lora.adapter_of(model) if lora is not None else None
            if adapter is None or book is None or lora is None:
                out.append(0.0)
                continue
            out.append(adapter_cost(lora.load_s, book.holds(adapter), len(inst.running), self.stall_running,
                                    slot_wait(inst, adapter, now)))
        return out
