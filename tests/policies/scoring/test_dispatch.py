"""A profile's decision: filters, the weighted sum with one scale per unit, picker, guards."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scoring_helpers import call, harness_with

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.catalog import FILTERS, GUARDS, SCORERS
from flowserve.policies.scoring.dispatch import ScoredDispatch
from flowserve.policies.scoring.plugin import CostScorer, Decision, Filter, Guard, Scorer
from flowserve.policies.scoring.profile import PartSpec, ProfileSpec

COSTS: dict[str, list[float]] = {}  # per test: what the fixed scorers return


class SecondsA(CostScorer):
    name = "a"
    unit = "s"

    def cost(self, d: Decision) -> list[float]:
        return COSTS["a"][:len(d.candidates)]


class SecondsB(SecondsA):
    name = "b"

    def cost(self, d: Decision) -> list[float]:
        return COSTS["b"][:len(d.candidates)]


class Blocks(SecondsA):
    name = "blocks"
    unit = "blocks"

    def cost(self, d: Decision) -> list[float]:
        return COSTS["blocks"][:len(d.candidates)]


class Half(Scorer):
    name = "half"

    def score(self, d: Decision) -> list[float]:
        return [0.5] * len(d.candidates)


class NotB(Filter):
    name = "not_b"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return inst.name != "b"


class NoneLeft(Filter):
    name = "none"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return False


class ToLast(Guard):
    name = "to_last"

    def __init__(self) -> None:
        self.stats = {"moved": 0}

    def review(self, chosen: InstanceState, d: Decision) -> InstanceState:
        self.stats["moved"] += 1
        return d.candidates[-1]


@pytest.fixture(autouse=True, scope="module")
def parts() -> Iterator[None]:
    """This module's parts in the catalog, by name."""
    with pytest.MonkeyPatch.context() as mp:
        for registry, classes in ((SCORERS, (SecondsA, SecondsB, Blocks, Half)), (FILTERS, (NotB, NoneLeft)),
                                  (GUARDS, (ToLast,))):
            for cls in classes:
                mp.setitem(registry, cls.name, cls)
        yield


def path(cls: type) -> str:
    return cls.name


def profile(scorers: Sequence[tuple[type, float]], filters: Sequence[type] = (), guards: Sequence[type] = ()
            ) -> ScoredDispatch:
    return ScoredDispatch(ProfileSpec("t", tuple(PartSpec(path(c), weight=w) for c, w in scorers),
                                      tuple(PartSpec(path(c)) for c in filters),
                                      guards=tuple(PartSpec(path(c)) for c in guards)))


def test_costs_of_one_unit_share_one_scale() -> None:
    h, insts = harness_with(["a", "b", "c"])
    COSTS.update(a=[1.0, 4.0, 2.0], b=[3.0, 0.0, 0.0], blocks=[10.0, 0.0, 2.0])
    p = profile([(SecondsA, 1.0), (SecondsB, 2.0), (Blocks, 1.0), (Half, 2.0)])
    d = Decision(call(), insts, h.at(0.0))
    # seconds share S = 4: a 1·(1 − 1/4) + 2·(1 − 3/4) = 1.25; b 0 + 2 = 2; c 0.5 + 2 = 2.5
    # blocks on their own scale 10: 0, 1, 0.8; half: 1 each
    assert p.totals(d) == pytest.approx([1.25 + 0.0 + 1.0, 2.0 + 1.0 + 1.0, 2.5 + 0.8 + 1.0])
    assert p.choose(call(), insts, h.at(0.0)) is insts[2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 3)), min_size=2, max_size=6),
       st.integers(0, 4), st.integers(1, 4))
def test_orders_exactly_as_the_weighted_sum_of_costs(rows, wa, wb) -> None:
    """Integer costs tie exactly; the profile breaks those ties as a policy written in seconds
    would, by the fewest dispatched, then the first."""
    h, insts = harness_with([f"i{k}" for k in range(len(rows))])
    COSTS.update(a=[float(r[0]) for r in rows], b=[float(r[1]) for r in rows])
    for inst, r in zip(insts, rows, strict=True):
        inst.dispatched = r[2]
    p = profile([(SecondsA, float(wa)), (SecondsB, float(wb))])
    want = min(range(len(rows)), key=lambda k: (wa * rows[k][0] + wb * rows[k][1], rows[k][2], k))
    assert p.choose(call(), insts, h.at(0.0)) is insts[want]


def test_filters_narrow_unless_none_would_be_left_and_guards_overrule() -> None:
    h, (a, b, c) = harness_with(["a", "b", "c"])
    COSTS.update(a=[0.0, 0.0, 5.0])
    assert profile([(SecondsA, 1.0)]).choose(call(), [a, b, c], h.at(0.0)) is a
    assert profile([(SecondsA, 1.0)], [NoneLeft]).choose(call(), [a, b, c], h.at(0.0)) is a  # skipped
    COSTS.update(a=[0.0, 5.0])  # after `not_b`: a and c
    assert profile([(SecondsA, 1.0)], [NotB]).choose(call(), [a, b, c], h.at(0.0)) is a
    guarded = profile([(SecondsA, 1.0)], [NotB], [ToLast])
    assert guarded.choose(call(), [a, b, c], h.at(0.0)) is c
    assert guarded.stats == {"moved": 1}
    assert guarded.choose(call(), [a, b], h.at(0.0)) is a  # one candidate left: nothing to score or guard


def test_declarations_follow_the_parts() -> None:
    COSTS.update(a=[0.0])
    plain = profile([(SecondsA, 1.0)])
    assert not plain.uses_deadline and not plain.needs_prefix_index and plain.shares_prefills
    spec = ProfileSpec("t", (PartSpec("uncached_work"),), shares_prefills=False, prefix_window_s=0.0)
    deadline = ScoredDispatch(spec)
    assert deadline.uses_deadline and deadline.needs_prefix_index
    assert not deadline.shares_prefills and deadline.prefix_window_s == 0.0 and deadline.name == "t"


def test_each_query_class_has_its_own_parts() -> None:
    h, insts = harness_with(["a", "b"])
    COSTS.update(a=[0.0, 5.0], b=[5.0, 0.0])
    spec = ProfileSpec("t", (PartSpec("a", classes=("interactive",)), PartSpec("b", classes=("batch",))),
                       guards=(PartSpec("to_last", classes=("batch",)),))
    p = ScoredDispatch(spec)
    assert p.choose(call(), insts, h.at(0.0)) is insts[0]  # a's costs, no guard
    assert p.choose(call(cls="batch"), insts, h.at(0.0)) is insts[1]  # b's costs, then the guard
    assert p.stats == {"moved": 1}
