"""Stage priors: mean residual call counts, learned from finished queries."""

import pytest

from flowserve.profiles.stage_priors import StagePriors, mean_residual, residual_from_sorted


def test_mean_residual_by_hand():
    counts = [1, 2, 2, 7]
    assert mean_residual(counts, 0) == 3.0           # (1 + 2 + 2 + 7) / 4
    assert mean_residual(counts, 2) == (0 + 0 + 5) / 3
    assert mean_residual(counts, 7) == 0.0
    assert mean_residual(counts, 8) == 0.0           # none went that far
    suffix = [12, 11, 9, 7, 0]
    for k in range(9):
        assert residual_from_sorted(counts, suffix, k) == pytest.approx(mean_residual(counts, k))


def test_priors_per_workflow_and_stage_with_a_window():
    p = StagePriors(window=2)
    assert p.expected("prog", {}) == []
    p.observe("prog", [("plan", 100), ("act", 300), ("act", 500)])
    p.observe("prog", [("plan", 200)])
    by = {e.stage: e for e in p.expected("prog", {"plan": 1})}
    assert "plan" not in by                           # every program made exactly one plan call
    assert by["act"].count == 1.0 and by["act"].input_tokens == 400  # (2 + 0) / 2; mean prompt
    p.observe("prog", [("plan", 100)] * 3)             # the window drops the first program
    by = {e.stage: e for e in p.expected("prog", {"plan": 1})}
    assert by["plan"].count == (0 + 2) / 2 and "act" not in by
    assert p.expected("other", {}) == [] and p.queries("prog") == 2
    with pytest.raises(ValueError):
        StagePriors(window=0)
