"""Instances that serve LoRA adapters, for the adapters' tests: a harness of llama-3.1-8b
instances with adapters `a`, `b`, `c` (two slots each), and calls naming an adapter."""

from __future__ import annotations

import itertools

from helpers import call_state

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, InstanceState
from flowserve.policies.fcfs import FCFS
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import EngineParams, InstanceSpec, LoraSpec
from flowserve.types.work import LLMCall

COST = cost_model_for("A100-80G", "llama-3.1-8b")
LORA = LoraSpec(("a", "b", "c"), max_loras=2, load_s=0.5)
_ids = itertools.count(50_000)


def lora_instances(names: list[str]) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b", engine=EngineParams(lora=LORA)), COST, FCFS())
             for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def adapter_call(model: str | None) -> CallState:
    return call_state(LLMCall(next(_ids), 1, "n", "s", "w", (1, 2, 3), 16, 16, model))


def running(inst: InstanceState, model: str | None) -> CallState:
    """A call naming `model` sent to `inst`'s engine."""
    cs = adapter_call(model)
    inst.running[cs.id] = cs
    return cs
