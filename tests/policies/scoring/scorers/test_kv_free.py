"""`kv_free`: 1 − KV utilisation, by hand."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with, load

from flowserve.policies.scoring.scorers.kv_free import KVFree, kv_utilization
from flowserve.types.specs import InstanceSpec


def test_utilisation_from_running_calls_or_the_engines_report() -> None:
    h, (a, b) = harness_with(["a", "b"])
    assert kv_utilization(a) == 0.0  # capacity unknown
    a.kv_capacity = b.kv_capacity = 10_000
    load(a, running=2, tokens=2984)  # 2 × (2984 + 16 predicted) = 6000 tokens of 10,000
    assert kv_utilization(a) == 0.6
    b.spec = InstanceSpec("b", "A100-80G", "llama-3.1-8b", reports_capacity=True)
    b.kv_free = 7500  # the engine says a quarter is in use
    assert kv_utilization(b) == 0.25
    assert KVFree().score(decision(h, call(), [a, b])) == [0.4, 0.75]


def test_at_most_full() -> None:
    _, (a,) = harness_with(["a"])
    a.kv_capacity = 1000
    load(a, running=1, tokens=5000)
    assert kv_utilization(a) == 1.0
