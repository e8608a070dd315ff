"""`serves_model`: the call's model, another served name or a LoRA adapter, case-insensitive;
a call naming none goes anywhere."""

from __future__ import annotations

from helpers import call_state
from lora_helpers import COST, LORA
from scoring_helpers import decision, harness_with

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import InstanceState
from flowserve.policies.fcfs import FCFS
from flowserve.policies.scoring.filters.serves_model import ServesModel
from flowserve.types.specs import EngineParams, InstanceSpec
from flowserve.types.work import LLMCall


def test_keeps_the_instances_serving_the_calls_model() -> None:
    h, (a, _) = harness_with(["a", "b"])
    b = InstanceState(InstanceSpec("b", "A100-80G", "qwen-2.5-7b"), COST, FCFS())
    named = call_state(LLMCall(1, 1, "n", "s", "w", (1, 2, 3), 4, 4, "Llama-3.1-8B"))
    anyone = call_state(LLMCall(2, 1, "n", "s", "w", (1, 2, 3), 4, 4))
    assert [ServesModel().keep(i, decision(h, named, [a, b])) for i in (a, b)] == [True, False]
    assert [ServesModel().keep(i, decision(h, anyone, [a, b])) for i in (a, b)] == [True, True]


def test_keeps_the_instances_serving_the_adapter_or_alias() -> None:
    plain = InstanceState(InstanceSpec("plain", "A100-80G", "llama-3.1-8b"), COST, FCFS())
    lora = InstanceState(InstanceSpec("lora", "A100-80G", "llama-3.1-8b", engine=EngineParams(lora=LORA),
                                      aliases=("chat",)), COST, FCFS())
    h = PolicyHarness([plain, lora])
    keep = ServesModel().keep
    for model, kept in (("B", [False, True]), ("chat", [False, True]), ("llama-3.1-8b", [True, True])):
        cs = call_state(LLMCall(3, 1, "n", "s", "w", (1, 2, 3), 4, 4, model))
        assert [keep(i, decision(h, cs, [plain, lora])) for i in (plain, lora)] == kept, model
