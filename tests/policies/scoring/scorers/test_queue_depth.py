"""`queue_depth`: min-max normalised queue length, by hand."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with, load

from flowserve.policies.scoring.scorers.queue_depth import QueueDepth, queue_score


def test_queue_score_by_hand() -> None:
    assert queue_score(0, 0, 4) == 1.0
    assert queue_score(1, 0, 4) == 0.75  # (4 − 1) / (4 − 0)
    assert queue_score(4, 0, 4) == 0.0
    assert queue_score(3, 3, 3) == 1.0  # every queue as long


def test_scores_the_candidates_queues() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    load(a, queued=4)
    load(b, queued=1)
    assert QueueDepth().score(decision(h, call(), [a, b, c])) == [0.0, 0.75, 1.0]
