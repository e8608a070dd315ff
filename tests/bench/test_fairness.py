"""`bench fairness`'s figures by hand, and its scenarios' shape."""

from __future__ import annotations

import pytest

from flowserve.bench.fairness import FLOOD, LIGHT_RATE, goals, scenarios, summary, text2sql
from flowserve.workloads.mixes import mix, tag


def test_summary_counts_tokens_only_within_the_window() -> None:
    wl = mix("m", [tag(text2sql(1.0, 2, 0), 0, "gold"), tag(text2sql(1.0, 2, 1), 1, "free")])
    gold = [q.id for q in wl.queries if q.tenant == "gold"]
    free = [q.id for q in wl.queries if q.tenant == "free"]
    lat = {gold[0]: 2.0, gold[1]: 4.0, free[0]: 10.0}
    calls = [(gold[0], 1.0, 300), (free[0], 2.0, 100), (free[1], 9.0, 1000)]  # the last ends after the window
    s = summary(wl, lat, calls, window=5.0)
    assert s["mean_latency_s"] == {"free": 10.0, "gold": 3.0}
    assert s["queries"] == {"free": 1, "gold": 2}
    assert s["token_share"] == {"free": pytest.approx(0.25), "gold": pytest.approx(0.75)}


def test_goals_compare_the_flood_with_alone_and_the_shares_with_the_weights() -> None:
    res = {"alone": {"mean_latency_s": {"gold": 10.0}}, "flood": {"mean_latency_s": {"gold": 12.0}},
           "both": {"token_share": {"gold": 0.70, "free": 0.30}}}
    g = goals(res)
    assert g["light_latency_ratio"] == pytest.approx(1.2) and g["light_within_1.25x"]
    assert g["gold_share"] == 0.70 and g["shares_within_10pct"]  # 0.70 / 0.75 = 0.933
    res["flood"]["mean_latency_s"]["gold"] = 13.0
    res["both"]["token_share"]["gold"] = 0.67  # 0.893: more than 10% under
    g = goals(res)
    assert not g["light_within_1.25x"] and not g["shares_within_10pct"]


def test_scenarios_flood_at_three_times_capacity_over_the_light_tenants_window() -> None:
    wls = scenarios(light=6, cap=0.5, seed=0)
    alone = wls["alone"].queries
    window = max(q.arrival for q in alone)
    assert len(alone) == 6 and {q.tenant for q in alone} == {"gold"}
    assert window == pytest.approx(5 / LIGHT_RATE, rel=0.8)
    flood = [q for q in wls["flood"].queries if q.tenant == "free"]
    assert len(flood) == round(FLOOD * 0.5 * window)
    assert {q.tenant for q in wls["both"].queries} == {"gold", "free"}
