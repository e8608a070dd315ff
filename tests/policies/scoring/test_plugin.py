"""The parts' contract: the decision's shared values, and costs as scores."""

from __future__ import annotations

from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.plugin import CostScorer, Decision, normalised


def test_normalised_by_hand() -> None:
    assert normalised([1.0, 4.0, 2.0], 0.0) == [0.75, 0.0, 0.5]
    assert normalised([1.0, 2.0], 8.0) == [0.875, 0.75]  # a shared scale above its own costs
    assert normalised([0.0, 0.0], 0.0) == [1.0, 1.0]


def test_once_computes_a_value_once_per_decision() -> None:
    h, insts = harness_with(["a", "b"])
    d = decision(h, call(), insts)
    calls = []
    assert d.once("x", lambda: calls.append(1) or 7) == 7
    assert d.once("x", lambda: calls.append(1) or 8) == 7
    assert calls == [1]
    d.narrowed(insts[:1])
    assert d.once("x", lambda: 9) == 9 and d.candidates == insts[:1]


def test_a_cost_scorer_alone_scores_on_its_own_scale() -> None:
    class Fixed(CostScorer):
        name = "fixed"

        def cost(self, d: Decision) -> list[float]:
            return [2.0, 8.0]

    h, insts = harness_with(["a", "b"])
    assert Fixed().score(decision(h, call(), insts)) == [0.75, 0.0]
