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


def lora_instances(names: list[str], lora: LoraSpec | None = LORA) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(n, "A100-80G", "llama-3.1-8b", engine=EngineParams(lora=lora)), COST, FCFS())
             for n in names]
    return PolicyHarness(insts, prefix_index=PrefixIndex()), insts


def adapter_call(model: str | None, out: int = 16, t_comp: float = 1.0) -> CallState:
    cs = call_state(LLMCall(next(_ids), 1, "n", "s", "w", (1, 2, 3), out, out, model))
    cs.t_comp = t_comp
    return cs


def running(inst: InstanceState, model: str | None, released: float = 0.0, t_comp: float = 1.0) -> CallState:
    """A call naming `model` sent to `inst`'s engine at `released`, predicted to compute `t_comp` s."""
    cs = adapter_call(model, t_comp=t_comp)
    cs.released = released
    inst.running[cs.id] = cs
    return cs
