"""The `cache_affinity` filter: the best-caching pool, near ties, the load guard."""

from __future__ import annotations

import pytest
from scoring_helpers import P, call, decision, harness_with, load

from flowserve.policies.scoring.filters.cache_affinity import CacheAffinity, affinity_pool


def test_affinity_pool_by_hand() -> None:
    hits, finish = [900, 850, 100], [3.0, 4.0, 1.0]
    # best 900, floor 900·0.9 = 810: a and b; their best finish 3 > 2 × 1: too busy, everyone kept
    assert affinity_pool(hits, finish, 16, 0.1, 2.0) == [True, True, True]
    assert affinity_pool(hits, finish, 16, 0.1, 4.0) == [True, True, False]  # 3 ≤ 4 × 1: the pool
    assert affinity_pool(hits, finish, 16, 0.0, 4.0) == [True, False, False]  # no near ties
    assert affinity_pool([10, 0], [1.0, 1.0], 16, 0.1, 2.0) == [True, True]  # nothing cached: all


def test_keeps_the_prefix_holder_until_it_is_too_busy() -> None:
    h, (a, b) = harness_with(["a", "b"])
    h.prefix_index.add(P, "a", 0.0)
    f = CacheAffinity()
    d = decision(h, call(P + tuple(range(5000, 5024))), [a, b])
    assert [f.keep(i, d) for i in (a, b)] == [True, False]
    load(a, queued=40, tokens=2000)  # a finishes the call far more than 2× later than b
    d = decision(h, call(P + tuple(range(6000, 6024))), [a, b])
    assert [f.keep(i, d) for i in (a, b)] == [True, True]


@pytest.mark.parametrize(("params", "message"), [
    ({"min_match": 0}, "min_match must be ≥ 1"), ({"near_tie": 1.0}, r"near_tie must be in \[0, 1\)"),
    ({"load_guard": 0.5}, "load_guard must be ≥ 1"),
])
def test_bad_parameters(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CacheAffinity(**params)
