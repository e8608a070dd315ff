"""`healthy`: up, and not among the instances that failed the call."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.filters.healthy import Healthy


def test_keeps_up_instances_that_did_not_fail_the_call() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    b.up = False
    cs = call()
    cs.excluded = frozenset({"c"})
    d = decision(h, cs, [a, b, c])
    assert [Healthy().keep(i, d) for i in (a, b, c)] == [True, False, False]
