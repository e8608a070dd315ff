"""`affinity`: 1 on the instance that ran the query's last call."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.scorers.affinity import SessionAffinity


def test_scores_the_instance_of_the_querys_last_call() -> None:
    h, (a, b) = harness_with(["a", "b"])
    cs = call()
    assert SessionAffinity().score(decision(h, cs, [a, b])) == [0.0, 0.0]  # its first call
    cs.query.last_instance = "b"
    assert SessionAffinity().score(decision(h, cs, [a, b])) == [0.0, 1.0]
