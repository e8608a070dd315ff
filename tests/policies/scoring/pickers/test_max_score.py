"""`max_score`: the best total; near-ties to the fewest dispatched, then the first."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.pickers.max_score import MaxScore, best_index


def test_best_index_by_hand() -> None:
    assert best_index([0.2, 0.9, 0.5], [0, 0, 0]) == 1
    assert best_index([0.9, 0.9, 0.5], [3, 1, 0]) == 1  # tied: fewer dispatched
    assert best_index([0.9, 0.9, 0.9], [2, 2, 2]) == 0  # tied all through: the first
    assert best_index([0.9, 0.9 - 1e-12, 0.5], [5, 1, 0]) == 1  # rounding noise is a tie
    assert best_index([0.9, 0.9 - 1e-6, 0.5], [5, 1, 0]) == 0  # a real difference is not
    assert best_index([0.9, 0.9 - 1e-6], [5, 1], tolerance=1e-5) == 1


def test_picks_from_the_decisions_candidates() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    a.dispatched, b.dispatched = 4, 2
    assert MaxScore().pick([1.0, 1.0, 0.0], decision(h, call(), [a, b, c])) is b
