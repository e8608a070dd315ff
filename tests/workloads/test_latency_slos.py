"""Per-request TTFT/TPOT objectives on a workload: drawn by seed in the classes' shares,
from Python and from YAML (`kind: slo`)."""

from __future__ import annotations

import pytest

from flowserve.errors import ConfigError
from flowserve.types.work import LatencySLO
from flowserve.workloads.latency_slos import SLOClass, chat_workload, with_latency_slos
from flowserve.workloads.registry import load_workload

TIGHT, LOOSE = LatencySLO(0.5, 0.03), LatencySLO(6.0, 0.2)


def test_classes_are_drawn_in_their_shares_the_same_for_the_same_seed() -> None:
    base = chat_workload(2000, 10.0, seed=5)
    wl = with_latency_slos(base, [SLOClass(1, TIGHT), SLOClass(3, LOOSE, priority=-1)], seed=9)
    assert [q.arrival for q in wl.queries] == [q.arrival for q in base.queries]
    loose = [q for q in wl.queries if q.slo == LOOSE]
    assert len(loose) / len(wl.queries) == pytest.approx(0.75, abs=0.03)
    assert all(q.priority == -1 for q in loose) and all(q.priority == 0 for q in wl.queries if q.slo == TIGHT)
    again = with_latency_slos(base, [SLOClass(1, TIGHT), SLOClass(3, LOOSE, priority=-1)], seed=9)
    assert [q.slo for q in again.queries] == [q.slo for q in wl.queries]
    with pytest.raises(ValueError, match="shares"):
        with_latency_slos(base, [SLOClass(0, TIGHT)], seed=1)


def test_chat_requests_are_one_call_each_with_a_shared_system_prompt() -> None:
    wl = chat_workload(200, 5.0, seed=1)
    assert len(wl.queries) == 200 and all(len(q.plan.calls()) == 1 for q in wl.queries)
    systems = {q.plan.calls()[0].prompt[0].id for q in wl.queries}
    assert 1 < len(systems) <= 16


def test_yaml_kind_slo() -> None:
    wl = load_workload({"kind": "slo", "base": {"kind": "tool_use", "rate": 2, "queries": 50, "max_prompt": 4000},
                        "classes": [{"share": 1, "ttft_ms": 800, "tpot_ms": 50}], "seed": 3})
    assert {q.slo for q in wl.queries} == {LatencySLO(0.8, 0.05)}
    with pytest.raises(ConfigError, match="ttft_ms"):
        load_workload({"kind": "slo", "base": "tool_use", "classes": [{"share": 1, "ttft_ms": -1}]})
    with pytest.raises(ConfigError, match="classes"):
        load_workload({"kind": "slo", "base": "tool_use", "classes": []})
