"""The SLO-headroom formula and the latency objectives, against hand-computed examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowserve.policies.slo.headroom import admits, headroom_score, slo_load
from flowserve.types.work import LatencySLO


def test_the_load_is_the_larger_share_of_an_objective_used() -> None:
    slo = LatencySLO(ttft_s=1.0, tpot_s=0.040)
    assert slo_load(0.5, 0.010, slo) == pytest.approx(0.5)  # TTFT 0.5/1.0 > TPOT 10/40
    assert slo_load(0.2, 0.060, slo) == pytest.approx(1.5)  # TPOT 60/40 > TTFT 0.2/1.0
    assert slo_load(9.0, 0.060, LatencySLO(tpot_s=0.040)) == pytest.approx(1.5)  # no TTFT objective: TTFT free
    assert slo_load(9.0, 9.0, LatencySLO()) == 0.0


def test_the_score_is_one_over_one_plus_the_load() -> None:
    assert headroom_score(0.0) == 1.0
    assert headroom_score(0.5) == pytest.approx(2 / 3)
    assert headroom_score(1.0) == 0.5  # exactly at the objective
    assert headroom_score(3.0) == 0.25


@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_the_score_is_in_range_and_orders_as_the_load(a: float, b: float) -> None:
    ha, hb = headroom_score(a), headroom_score(b)
    assert 0.0 < ha <= 1.0
    assert (ha >= 0.5) == (a <= 1.0)
    if a < b:
        assert ha >= hb


def test_admission_needs_one_load_within_the_margin() -> None:
    assert admits([1.4, 0.9])
    assert not admits([1.4, 1.1])
    assert admits([1.4, 1.1], margin=1.2)
    assert not admits([math.inf])


def test_objectives_must_be_positive_finite_and_are_met_per_measure() -> None:
    with pytest.raises(ValueError, match="ttft_s"):
        LatencySLO(ttft_s=0.0)
    with pytest.raises(ValueError, match="tpot_s"):
        LatencySLO(tpot_s=math.inf)
    slo = LatencySLO(ttft_s=1.0, tpot_s=0.05)
    assert slo.met(1.0, 0.05)
    assert not slo.met(1.01, 0.01)
    assert not slo.met(0.5, 0.051)
    assert not slo.met(None, None)  # no first token: the TTFT objective is missed
    assert slo.met(0.5, None)  # one output token: no TPOT to miss
