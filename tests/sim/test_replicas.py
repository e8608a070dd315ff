"""Replicas in the simulator: N cores share the engines, each query runs on one of them,
ids stay distinct at the engines, and syncing is what keeps the cache hits of one
scheduler (without it, each replica routes blind to the others' prefixes)."""

from __future__ import annotations

import pytest

from flowserve.api import cluster_specs, simulate
from flowserve.errors import ConfigError
from flowserve.metrics.summary import summarize
from flowserve.sim.run import PolicySpec
from flowserve.sim.run import simulate as run
from flowserve.workloads.registry import load_workload

SPECS = cluster_specs("hetero-1", None)
WORKLOAD = load_workload("tool_use", {"rate": 15, "queries": 300}, None)


def hit_and_latency(replicas: int, sync_ms: float) -> tuple[float, float, int]:
    r = run(SPECS, WORKLOAD, PolicySpec("preble_e2", "fcfs", replicas=replicas, sync_ms=sync_ms), 10.0)
    s = summarize(r)
    assert len(r.queries) == 300 and not any(q.failed for q in r.queries)  # every query ended once
    assert len({c.call_id for c in r.calls}) == len(r.calls)  # ids distinct across the replicas
    return s["token_hit_rate"], s["latency_s"]["mean"], sum(i.completed for i in r.instances)


def test_synced_replicas_keep_one_schedulers_hit_rate_and_blind_ones_lose_it() -> None:
    one_hit, one_lat, one_calls = hit_and_latency(1, 20)
    hit, lat, calls = hit_and_latency(4, 20)
    blind_hit, blind_lat, _ = hit_and_latency(4, 600_000)  # never syncs within the run
    assert calls == one_calls
    assert abs(hit - one_hit) < 0.02 and lat < 1.1 * one_lat
    assert blind_hit < one_hit - 0.04 and blind_lat > lat


def test_replicas_are_deterministic_and_described() -> None:
    a = simulate("hetero-1", "tool_use", "flowserve", "flowserve", slo_scales=[10], replicas=3, sync_ms=50,
                 workload_params={"queries": 120})
    b = simulate("hetero-1", "tool_use", "flowserve", "flowserve", slo_scales=[10], replicas=3, sync_ms=50,
                 workload_params={"queries": 120})
    assert a.summary["latency_s"] == b.summary["latency_s"]
    assert a.summary["policy"]["replicas"] == 3 and a.summary["policy"]["sync_ms"] == 50


@pytest.mark.parametrize(("kw", "says"), [({"replicas": 0}, "replicas: expected 1 to 64"),
                                          ({"replicas": True}, "replicas"), ({"sync_ms": 0}, "sync_ms"),
                                          ({"sync_ms": float("nan")}, "sync_ms")])
def test_bad_replica_settings_are_refused(kw: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        simulate("hetero-1", "tool_use", **kw)
