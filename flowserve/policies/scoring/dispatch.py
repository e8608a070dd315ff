"""A dispatch policy composed from a scoring profile (`flowserve.policies.scoring.profile`):
filters → weighted scorers → picker → guards (`flowserve.policies.scoring.plugin`).

A part may apply to the calls of some query classes only (`classes: [batch]`): each class
has its own filters, scorers and guards (`Parts`), the picker is shared. The profile's
declarations follow from its parts: it reads deadlines or the prefix index when one of
its parts does; `shares_prefills` and the index's `prefix_window_s` are the
profile's own fields. `stats` gathers its guards' counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.scoring.catalog import build_part
from flowserve.policies.scoring.plugin import CostScorer, Decision, Filter, Guard, Picker, Scorer
from flowserve.policies.scoring.profile import ProfileSpec
from flowserve.types.work import QUERY_CLASSES


class ScoredDispatch(DispatchPolicy):
    """Dispatch by a scoring profile (see the module docstring)."""

    name = "profile"

    def __init__(self, profile: ProfileSpec) -> None:
        self.profile = profile
        self.name = profile.name  # type: ignore[misc]  (a profile's name, as a class's)
        where = f"dispatch profile {profile.name!r}"
        filters = [(p.classes, build_part("filter", p.name, p.params, where)) for p in profile.filters]
        scorers = [(p.classes, p.weight, build_part("scorer", p.name, p.params, where)) for p in profile.scorers]
        guards = [(p.classes, build_part("guard", p.name, p.params, where)) for p in profile.guards]
        self.picker: Picker = build_part("picker", profile.picker.name, profile.picker.params, where)
        self.by_class = {cls: Parts([f for c, f in filters if cls in c], [(w, s) for c, w, s in scorers if cls in c],
                                    [g for c, g in guards if cls in c]) for cls in QUERY_CLASSES}
        self.guards = [g for _, g in guards]
        parts = [*(f for _, f in filters), *(s for _, _, s in scorers), self.picker, *self.guards]
        self.uses_deadline = any(p.uses_deadline for p in parts)  # type: ignore[misc]
        self.needs_prefix_index = any(p.needs_prefix_index for p in parts)  # type: ignore[misc]
        self.shares_prefills = profile.shares_prefills  # type: ignore[misc]
        self.prefix_window_s = profile.prefix_window_s

    @property
    def stats(self) -> Mapping[str, int]:  # type: ignore[override]
        return {k: v for g in self.guards for k, v in g.stats.items()}

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        parts = self.by_class[cs.query.query.cls]
        d = Decision(cs, candidates, view)
        for f in parts.filters:
            kept = [i for i in d.candidates if f.keep(i, d)]
            if kept and len(kept) < len(d.candidates):  # a filter that would leave none is skipped
                d.narrowed(kept)
        if len(d.candidates) == 1:
            return d.candidates[0]
        chosen = self.picker.pick(parts.totals(d), d)
        for g in parts.guards:
            chosen = g.review(chosen, d)
        return chosen

    def totals(self, d: Decision) -> list[float]:
        """Each candidate's weighted sum of scores for the decision's call (`Parts.totals`)."""
        return self.by_class[d.call.query.query.cls].totals(d)


class Parts:
    """The parts a profile applies to the calls of one query class."""

    __slots__ = ("costs", "filters", "guards", "scorers")

    def __init__(self, filters: list[Filter], scorers: list[tuple[float, Scorer]], guards: list[Guard]) -> None:
        self.filters = filters
        self.guards = guards
        self.scorers = [(w, s) for w, s in scorers if not isinstance(s, CostScorer)]
        units: dict[str, list[tuple[float, CostScorer]]] = {}
        for w, s in scorers:
            if isinstance(s, CostScorer):
                units.setdefault(s.unit, []).append((w, s))
        self.costs = list(units.values())

    def totals(self, d: Decision) -> list[float]:
        """Each candidate's weighted sum of scores; the costs of one unit share one scale."""
        total = [0.0] * len(d.candidates)
        for w, s in self.scorers:
            for k, x in enumerate(s.score(d)):
                total[k] += w * x
        for terms in self.costs:
            costs = [(w, s.cost(d)) for w, s in terms]
            top = max(max(xs) for _, xs in costs)
            for w, xs in costs:
                if top > 0.0:
                    for k, x in enumerate(xs):
                        total[k] += w * (1.0 - x / top)
                else:
                    for k in range(len(total)):
                        total[k] += w
        return total
