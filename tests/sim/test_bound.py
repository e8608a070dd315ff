"""The critical-path bound (flowserve.sim.bound) on a small hand-computed graph."""

from __future__ import annotations

import pytest
from fork_app import CLUSTER, two_at_once

from flowserve.sim.bound import critical_path_latencies, unlimited
from flowserve.sim.run import PolicySpec, simulate


def test_the_bound_is_the_longest_path_and_alone_is_the_one_instance_schedule():
    policy = PolicySpec(passes="none")
    # unlimited: a (0.1 + 0.1) and b (0.1 + 0.3) at once, then c (0.05 + 0.01): 0.46 s
    assert critical_path_latencies(CLUSTER, two_at_once(), policy) == [pytest.approx(0.46)] * 2
    # alone on the cluster: a and b share one embedder batch (0.1 + 0.4), then c: 0.56 s
    assert critical_path_latencies(CLUSTER, two_at_once(), policy, copies=1) == [pytest.approx(0.56)] * 2
    # both queries at once: the second's a and b wait for the first's batch (0.5 + 0.5 + 0.06)
    res = simulate(CLUSTER, two_at_once(), policy, standalone=[1.0, 1.0])
    assert [q.latency for q in res.queries] == [pytest.approx(0.56), pytest.approx(1.06)]
    wide = unlimited(CLUSTER, 3)
    assert [s.name for s in wide if s.kind == "llm"] == ["llm~0", "llm~1", "llm~2"]
    assert [s.op_profile.concurrency for s in wide if s.kind != "llm"] == [3, 3]
