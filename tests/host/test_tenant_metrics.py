"""Per-tenant series with bounded labels (issue 35 item 7): the top N tenants, `other`
for the rest, bounded memory, every series a counter that only grows."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.host.tenant_metrics import TenantSeries, space_saving_add


def exported(series: TenantSeries) -> dict[tuple[str, str, str], float]:
    samples = [(m.name, s.labels["tenant"], next(v for k, v in s.labels.items() if k != "tenant"), s.value)
               for m in series.collect() for s in m.samples]
    out = {(name, tenant, label): value for name, tenant, label, value in samples}
    assert len(out) == len(samples), "a series exported twice"
    return out


def test_space_saving_keeps_every_heavy_item_with_a_count_never_under_its_weight() -> None:
    # hand-computed (Metwally et al. 2005): capacity 2, stream a a b c → c replaces b (count 1 + 1)
    counts: dict[str, float] = {}
    for item in "aabc":
        space_saving_add(counts, item, 1.0, 2)
    assert counts == {"a": 2.0, "c": 2.0}
    rng = random.Random(7)
    counts, true = {}, {}
    for _ in range(20_000):
        item = "heavy" if rng.random() < 0.2 else f"t{rng.randrange(5000)}"
        true[item] = true.get(item, 0) + 1
        space_saving_add(counts, item, 1.0, 50)
    assert len(counts) == 50 and counts["heavy"] >= true["heavy"]


def test_ten_thousand_tenants_keep_a_bounded_memory_and_bounded_series() -> None:
    series = TenantSeries(top=5)
    for i in range(10_000):
        series.add(f"t{i}", ("tokens", "output"), 1, 1)
    for _ in range(100):
        series.add("big", ("tokens", "output"), 10, 10)
    assert len(series) <= series.capacity == 64
    out = exported(series)
    tenants = {t for _, t, _ in out}
    assert len(tenants) == 6 and "big" in tenants and "other" in tenants
    # everything counted before "big" was ranked stays counted, under "other"
    total = sum(v for (name, _, kind), v in out.items() if kind == "output")
    assert total == 10_000 + 1000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([f"t{i}" for i in range(12)] + ["other"]),
                          st.sampled_from([("tokens", "prompt"), ("tokens", "output"), ("slo", "met")]),
                          st.integers(0, 50), st.booleans()), max_size=120), st.integers(0, 4))
def test_every_series_only_grows_and_they_sum_to_everything_counted(
        events: list[tuple[str, tuple[str, str], int, bool]], top: int) -> None:
    series = TenantSeries(top=top, capacity=6)
    before: dict[tuple[str, str, str], float] = {}
    counted: dict[tuple[str, str], float] = {}
    for i, (tenant, key, amount, scrape) in enumerate(events):
        series.add(tenant, key, amount, amount)
        counted[key] = counted.get(key, 0) + amount
        if scrape or i == len(events) - 1:
            now = exported(series)
            for k, v in before.items():  # a series that still exists never went down
                assert now.get(k, v) >= v
            assert len({t for _, t, _ in now}) <= top + 1
            for (_, value), total in counted.items():
                assert sum(v for (_, _, label), v in now.items() if label == value) == total
            before = now
