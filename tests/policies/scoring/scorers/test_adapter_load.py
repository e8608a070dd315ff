"""`adapter_load`: load seconds where the adapter is not held, the running calls' stall, and
the wait for a slot, by hand."""

from __future__ import annotations

import pytest
from lora_helpers import adapter_call, lora_instances, running
from scoring_helpers import decision

from flowserve.policies.scoring.scorers.adapter_load import AdapterLoad, adapter_cost, slot_wait


def test_adapter_cost_by_hand() -> None:
    assert adapter_cost(0.5, held=True, running=3, stall_running=True, slot_wait_s=0.0) == 0.0
    assert adapter_cost(0.5, held=False, running=3, stall_running=True, slot_wait_s=0.0) == 2.0  # (1 + 3) × 0.5
    assert adapter_cost(0.5, held=False, running=3, stall_running=False, slot_wait_s=1.5) == 2.0  # 0.5 + 1.5


def test_slot_wait_is_until_one_adapters_last_call_ends() -> None:
    _, (inst,) = lora_instances(["i"])
    running(inst, "b", released=0.0, t_comp=4.0)
    running(inst, "b", released=1.0, t_comp=4.0)  # b's last call ends at 5
    running(inst, "c", released=0.0, t_comp=3.0)  # c's at 3
    assert slot_wait(inst, "a", now=1.0) == pytest.approx(2.0)  # c's slot frees at 3
    assert slot_wait(inst, "b", now=1.0) == 0.0  # b runs: no slot needed


def test_costs_by_hand() -> None:
    h, (held, cold, full) = lora_instances(["held", "cold", "full"])
    running(held, "a", t_comp=10.0)  # holds a (and runs a call of it)
    running(cold, "b", t_comp=10.0)  # one call running, a not held
    running(full, "b", released=0.0, t_comp=2.0)
    running(full, "c", released=0.0, t_comp=3.0)
    d = decision(h, adapter_call("a"), [held, cold, full], now=0.5)
    # held: 0; cold: (1 + 1) × 0.5; full: (1 + 2) × 0.5 + (2 − 0.5)
    assert AdapterLoad().cost(d) == pytest.approx([0.0, 1.0, 3.0])
    assert AdapterLoad(stall_running=False).cost(d) == pytest.approx([0.0, 0.5, 2.0])


def test_a_base_model_call_costs_nothing() -> None:
    h, insts = lora_instances(["x", "y"])
    running(insts[1], "b")
    assert AdapterLoad().cost(decision(h, adapter_call(None), insts)) == [0.0, 0.0]
