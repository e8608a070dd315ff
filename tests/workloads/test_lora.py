"""The LoRA workload: Zipf popularity by hand, adapters named as models, and simulated end to
end: calls reach only the instances that list their adapter, and an adapter-aware profile
loads adapters less often than round robin."""

from __future__ import annotations

import pytest

from flowserve.api import simulate
from flowserve.policies.scoring.profile import shipped_profile
from flowserve.workloads import load_workload
from flowserve.workloads.lora import lora_workload, zipf_weights


def test_zipf_weights_by_hand() -> None:
    assert list(zipf_weights(4, 1.0)) == pytest.approx([0.48, 0.24, 0.16, 0.12])  # 1/k over 25/12
    assert list(zipf_weights(3, 0.0)) == pytest.approx([1 / 3] * 3)


def test_requests_name_their_adapter_and_share_its_system_prompt() -> None:
    wl = lora_workload(200, 10.0, seed=43, adapters=4, prefix="ad-")
    models = [q.model for q in wl.queries]
    assert set(models) <= {"ad-0", "ad-1", "ad-2", "ad-3"}
    assert models.count("ad-0") > models.count("ad-3")  # Zipf: the first is the most popular
    systems = {q.model: q.plan.steps[0][0].prompt[0] for q in wl.queries}
    assert len({s.id for s in systems.values()}) == len(systems)  # one system prompt per adapter
    assert all(q.model is None for q in lora_workload(20, 10.0, base_share=1.0).queries)


CLUSTER = {"instances": [
    {"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b", "lora_adapters": ["x0", "x1"], "max_loras": 1},
    {"name": "b", "gpu": "A100-80G", "model": "llama-3.1-8b", "lora_adapters": ["x1"], "max_loras": 1},
]}


def test_calls_reach_only_instances_listing_their_adapter() -> None:
    wl = lora_workload(40, 20.0, seed=43, adapters=2, prefix="x")
    res = simulate(CLUSTER, wl, "round_robin", "fcfs", slo_scales=[4])
    model = {q.id: q.model for q in wl.queries}
    assert {c.instance for c in res.primary.calls if model[c.query_id] == "x0"} == {"a"}
    assert {c.instance for c in res.primary.calls if model[c.query_id] == "x1"} == {"a", "b"}
    assert res["failed"] == 0 and res["adapter_loads"] >= 2


def test_lora_affinity_loads_adapters_less_often_than_round_robin() -> None:
    wl = load_workload("lora", {"queries": 150, "rate": 24.0, "seed": 43})
    aware = shipped_profile("llmd_lora").describe()
    loads = {name: simulate("lora-a100", wl, dispatch, "fcfs", slo_scales=[4])["adapter_loads"]
             for name, dispatch in (("round_robin", "round_robin"), ("llmd_lora", aware))}
    assert loads["llmd_lora"] < 0.75 * loads["round_robin"]
