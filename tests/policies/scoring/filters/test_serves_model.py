"""`serves_model`: the call's model, case-insensitive; a call naming none goes anywhere."""

from __future__ import annotations

from helpers import call_state
from scoring_helpers import decision, harness_with

from flowserve.policies.scoring.filters.serves_model import ServesModel
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall


def test_keeps_the_instances_serving_the_calls_model() -> None:
    h, (a, b) = harness_with(["a", "b"])
    b.spec = InstanceSpec("b", "A100-80G", "qwen-2.5-7b")
    named = call_state(LLMCall(1, 1, "n", "s", "w", (1, 2, 3), 4, 4, "Llama-3.1-8B"))
    anyone = call_state(LLMCall(2, 1, "n", "s", "w", (1, 2, 3), 4, 4))
    assert [ServesModel().keep(i, decision(h, named, [a, b])) for i in (a, b)] == [True, False]
    assert [ServesModel().keep(i, decision(h, anyone, [a, b])) for i in (a, b)] == [True, True]
