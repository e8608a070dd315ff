"""The contract of a scoring profile's parts: filters, scorers, a picker and guards, as
llm-d's scheduler composes them (filter → score → pick), and the `Decision` they share.

A dispatch decision through a profile (`flowserve.policies.scoring.dispatch`):

1. **filters** narrow the candidates, each on what the previous ones left; a filter that
   would leave none is skipped (the call must go somewhere; the core already keeps only
   up instances serving the call's model);
2. **scorers** score every remaining candidate in [0, 1] (1: best); a profile adds them
   by weight. A `CostScorer` states a cost in a unit instead (seconds, KV blocks): the
   profile turns the costs of every cost scorer of one unit into scores with ONE scale
   per decision, 1 − cost / S with S the largest cost of that unit, so the weighted sum
   of those scores orders the candidates exactly as the weighted sum of their costs does
   (a policy written in seconds is reproduced, not approximated);
3. the **picker** takes the candidate from the total scores;
4. **guards** may overrule the pick, for a stated reason each counts in `stats`.

Every part is an object built once per dispatch policy from its name and parameters
(constructor parameters that carry their help: `flowserve.core.params`); it only reads
what the decision hands it, does no IO and reads no clock (time is `view.now`), like
every policy. Plugins share values computed once per decision through `Decision.once`
(llm-d's CycleState).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from flowserve.core.policy import NO_STATS
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView

T = TypeVar("T")


class Decision:
    """One dispatch decision as every part of a profile sees it: the call, the candidates
    left by the filters (`candidates`; the scorers' lists follow their order), the view,
    and values computed once per decision that several parts read (`once`)."""

    __slots__ = ("_memo", "call", "candidates", "view")

    def __init__(self, call: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> None:
        self.call = call
        self.candidates = candidates
        self.view = view
        self._memo: dict[Any, Any] = {}

    def narrowed(self, candidates: Sequence[InstanceState]) -> None:
        """The filters left these (values computed per candidate so far are dropped)."""
        self.candidates = candidates
        self._memo.clear()

    def once(self, key: Any, compute: Callable[[], T]) -> T:
        """The value under `key` for this decision, computed by the first part that asks."""
        memo = self._memo
        if key in memo:
            return memo[key]
        value = memo[key] = compute()
        return value


class Plugin(ABC):  # noqa: B024 (the parts' common declarations; each kind adds its abstract method)
    """What every part declares (class attributes the profile reads):

    * `name`: how profiles name it;
    * `uses_deadline`: it reads queries' deadlines (the profile then does, as a policy);
    * `needs_prefix_index`: it reads the router's prefix index (`view.cached_tokens`...);
    * `stats`: its own counters, reported with the profile's (a guard's overrulings).
    """

    name: ClassVar[str] = ""
    uses_deadline: ClassVar[bool] = False
    needs_prefix_index: ClassVar[bool] = False
    stats: Mapping[str, int] = NO_STATS


class Filter(Plugin):
    """Keeps the candidates a call may go to."""

    @abstractmethod
    def keep(self, inst: InstanceState, d: Decision) -> bool:
        """Whether the call may go to `inst` (one of `d.candidates`)."""


class Scorer(Plugin):
    """Scores every candidate in [0, 1], 1 the best."""

    @abstractmethod
    def score(self, d: Decision) -> Sequence[float]:
        """One score per `d.candidates`, in their order, each in [0, 1]."""


class CostScorer(Scorer):
    """A scorer stated as a cost (lower is better) in `unit`; a profile normalises the costs
    of every cost scorer of one unit with one scale per decision (module docstring)."""

    unit: ClassVar[str] = "s"

    @abstractmethod
    def cost(self, d: Decision) -> Sequence[float]:
        """One cost ≥ 0 per `d.candidates`, in `unit`."""

    def score(self, d: Decision) -> list[float]:
        """Alone: 1 − cost / the largest cost this decision (1 for all when every cost is 0)."""
        return normalised(self.cost(d), 0.0)


class Picker(Plugin):
    """Takes the candidate from the profile's total scores."""

    @abstractmethod
    def pick(self, scores: Sequence[float], d: Decision) -> InstanceState:
        """One of `d.candidates`; `scores[i]` is candidate i's weighted total (higher is better)."""


class Guard(Plugin):
    """May overrule the picker, for a reason it states and counts in `stats`."""

    @abstractmethod
    def review(self, chosen: InstanceState, d: Decision) -> InstanceState:
        """The instance the call goes to: `chosen`, or another of `d.candidates`."""


def normalised(costs: Sequence[float], scale: float) -> list[float]:
    """Costs as scores in [0, 1]: 1 − x / S, S = max(scale, the largest cost); all 1 when S is 0."""
    top = max(scale, max(costs, default=0.0))
    if top <= 0.0:
        return [1.0] * len(costs)
    return [1.0 - x / top for x in costs]
