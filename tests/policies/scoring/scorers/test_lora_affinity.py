"""`lora_affinity`: llm-d's 1 / 0.8 / 0.6 / 0 by hand."""

from __future__ import annotations

from lora_helpers import adapter_call, lora_instances, running
from scoring_helpers import decision

from flowserve.policies.scoring.scorers.lora_affinity import LoraAffinity, adapters_in, lora_affinity_score
from flowserve.types.specs import LoraSpec


def test_lora_affinity_score_by_hand() -> None:
    assert lora_affinity_score(active=True, waiting=False, in_use=2, max_loras=2) == 1.0
    assert lora_affinity_score(active=False, waiting=True, in_use=1, max_loras=2) == 0.8  # room beats waiting
    assert lora_affinity_score(active=False, waiting=True, in_use=2, max_loras=2) == 0.6
    assert lora_affinity_score(active=False, waiting=False, in_use=2, max_loras=2) == 0.0


def test_scores_the_candidates_adapters() -> None:
    h, (active, room, waiting, full) = lora_instances(["active", "room", "waiting", "full"])
    running(active, "a")
    running(room, "b")
    running(waiting, "b")
    waiting.queue.push(adapter_call("A"))  # case-insensitive: adapter a
    running(full, "b")
    running(full, "c")
    d = decision(h, adapter_call("a"), [active, room, waiting, full])
    # waiting: a queued (1) + b running (1) = max_loras 2: no room, but a waits there
    assert LoraAffinity().score(d) == [1.0, 0.8, 0.6, 0.0]


def test_a_base_model_call_scores_one_everywhere() -> None:
    h, insts = lora_instances(["x", "y"])
    running(insts[0], "b")
    running(insts[0], "c")
    assert LoraAffinity().score(decision(h, adapter_call("llama-3.1-8b"), insts)) == [1.0, 1.0]


def test_adapters_in_names_each_adapter_once() -> None:
    assert adapters_in(["b", "B", None, "llama", "c"], LoraSpec(("A", "b", "c"))) == {"b", "c"}
