"""`uncached_work`: w · t_cold(fastest) · t_comp / t_cold, by hand."""

from __future__ import annotations

import pytest
from scoring_helpers import P, call, decision, harness_with

from flowserve.policies.scoring.scorers.uncached_work import UncachedWork, uncached_share


def test_uncached_share_by_hand() -> None:
    assert uncached_share(0.25, 1.0) == 0.25
    assert uncached_share(0.0, 0.0) == 1.0


def test_counts_what_the_cache_leaves_in_seconds_of_the_fastest_hardware() -> None:
    h, (a, b) = harness_with(["a", "b"], gpu={"b": "L4"})
    h.prefix_index.add(P, "a", 0.0)
    cs = call(P + (9,))  # deadline-free interactive: w = w_free on an idle cluster
    v = h.view
    fastest = min(v.t_cold(cs, a), v.t_cold(cs, b))
    assert fastest == v.t_cold(cs, a)
    [x_a, x_b] = UncachedWork(w_free=0.5).cost(decision(h, cs, [a, b]))
    assert x_a == pytest.approx(0.5 * fastest * v.t_comp(cs, a) / v.t_cold(cs, a))
    assert x_b == pytest.approx(0.5 * fastest)  # nothing cached on b: its whole work, in a's seconds
    assert UncachedWork(w_free=0.0).cost(decision(h, cs, [a, b])) == [0.0, 0.0]
    batch = call(P + (9,), cls="batch")  # batch work: w = 1
    assert UncachedWork(w_free=0.0).cost(decision(h, batch, [a, b]))[1] == pytest.approx(fastest)


def test_refuses_w_free_outside_0_1() -> None:
    with pytest.raises(ValueError, match="w_free"):
        UncachedWork(w_free=1.5)
