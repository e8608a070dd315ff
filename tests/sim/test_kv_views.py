"""The three views of a simulated engine: publishing its KV events (read through the gateway's
decoder), reporting its evictions, or estimated by the driver."""

from __future__ import annotations

import dataclasses

import pytest

from flowserve.cluster import _instances
from flowserve.core.scheduler import SchedulerCore
from flowserve.sim.kv_views import EstimatingEngine, PublishingEngine, viewed_engine, viewed_spec
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.kv import KVEventsSpec
from flowserve.workloads.shared_prefix import shared_prefix_workload

CLUSTER = list(_instances("mistral-7b", 1, [("a", "L4"), ("b", "L4")]))


def test_views_pick_the_engine_model() -> None:
    spec = CLUSTER[0]
    assert viewed_spec(spec, None) is spec
    precise = viewed_spec(spec, "precise")
    assert precise.kv_events == KVEventsSpec("", block_size=16)
    assert viewed_spec(precise, "estimated").kv_events is None
    cost = None  # the engines below only keep it
    assert isinstance(viewed_engine(precise, cost, 10_000, True), PublishingEngine)  # type: ignore[arg-type]
    assert isinstance(viewed_engine(spec, cost, 10_000, True, "estimated", 5_000), EstimatingEngine)  # type: ignore[arg-type]
    assert type(viewed_engine(spec, cost, 10_000, True)).__name__ == "SimEngine"  # type: ignore[arg-type]


@pytest.mark.parametrize("view", ["precise", "estimated", "engine"])
def test_a_simulation_runs_in_every_view(view: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cores: list[SchedulerCore] = []
    init = SchedulerCore.__init__

    def keep(self: SchedulerCore, *a: object, **kw: object) -> None:
        init(self, *a, **kw)  # type: ignore[arg-type]
        cores.append(self)
    monkeypatch.setattr(SchedulerCore, "__init__", keep)
    wl = shared_prefix_workload(40, 1.0, prefixes=4, prefix_tokens=2000, suffix_tokens=100, output_tokens=20, seed=2)
    r = simulate(CLUSTER, wl, PolicySpec("prefix_affinity"), cache_view=view)  # type: ignore[arg-type]
    assert len(r.queries) == 40 and all(q.failed is None for q in r.queries)
    assert sum(c.cached_tokens for c in r.calls) > 0.5 * 36 * 2000  # groups land where they are cached
    views = cores[-1].kv_views()
    if view == "precise":
        assert [v.precise for v in views] == [True, True] and sum(v.blocks for v in views) >= 4 * 125
        stats = cores[-1].kv_index()[1]  # type: ignore[index]
        assert stats.orphans == 0 and stats.unknown_removals == 0 and stats.confirmed > 0
    else:
        assert views == []


def test_a_configured_instance_publishes_by_default() -> None:
    cluster = [dataclasses.replace(CLUSTER[0], kv_events=KVEventsSpec("")), CLUSTER[1]]
    wl = shared_prefix_workload(10, 1.0, prefixes=2, prefix_tokens=500, suffix_tokens=50, output_tokens=5, seed=3)
    r = simulate(cluster, wl, PolicySpec("prefix_affinity"))
    assert len(r.queries) == 10
