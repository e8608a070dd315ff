"""`hbal`: Preble's T_hbal guard on the pick's finish against the earliest."""

from __future__ import annotations

import pytest
from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.guards.hbal import LoadBalanceGuard
from flowserve.policies.scoring.scorers.finish import finishes


def test_overrules_a_pick_that_finishes_too_late() -> None:
    h, (a, b) = harness_with(["a", "b"])
    cs = call()
    tc = h.view.t_comp(cs, a)
    a.outstanding = tc  # serial: a finishes at 2 tc, b at tc
    d = decision(h, cs, [a, b])
    assert finishes(d, "serial") == [2 * tc, tc]
    g = LoadBalanceGuard(t_hbal=1.5, wait_model="serial")
    assert g.review(a, d) is b and g.stats == {"rebalanced": 1}  # 2 tc > 1.5 × tc
    assert LoadBalanceGuard(t_hbal=2.5, wait_model="serial").review(a, decision(h, cs, [a, b])) is a
    with pytest.raises(ValueError, match="t_hbal"):
        LoadBalanceGuard(t_hbal=0.5)
