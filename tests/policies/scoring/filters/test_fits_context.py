"""`fits_context`: the prompt (and its answer) within the instance's context window."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.filters.fits_context import FitsContext, fits


def test_fits_by_hand() -> None:
    assert fits(4095, 1, 4096) and not fits(4096, 1, 4096)
    assert fits(4000, 96, 4096) and not fits(4000, 97, 4096)
    assert fits(10**6, 1, None)  # unknown window: kept


def test_keeps_the_instances_whose_window_holds_the_call() -> None:
    h, (a, b) = harness_with(["a", "b"])
    a.max_context, b.max_context = 1024, 8192
    cs = call(tuple(range(1000)), out=100)
    d = decision(h, cs, [a, b])
    assert [FitsContext().keep(i, d) for i in (a, b)] == [True, True]
    assert [FitsContext(with_output=True).keep(i, d) for i in (a, b)] == [False, True]
