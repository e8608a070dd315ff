"""`pin`: pin before replicate, for calls without a deadline (flowserve).

Batch work and deadline-free requests care more for their prefix's instance than for a
second saved: a call whose prompt is mostly cached (more than half) on some candidates
goes to the one of them that finishes it first (`finish`), unless that is later than
(1 + w) × the picked instance's finish (`pinned`; w from `flowserve.policies.scoring.
slack`: 1 for batch work, `w_free` otherwise) — only then is the prefix copied to another
instance. Calls with a deadline keep the pick. `stats`: `pinned` (overruled to a holder),
`replicated` (left a holder for the pick).
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Guard
from flowserve.policies.scoring.scorers.finish import WaitModel, finishes
from flowserve.policies.scoring.scorers.uncached_work import W_FREE_HELP
from flowserve.policies.scoring.slack import SlackBook


def pinned(holder_finish: float, best_finish: float, guard: float) -> bool:
    """Does a call stay with the holder of its prefix? While the holder finishes it within
    `guard` × the best finish elsewhere (SGLang's cache-aware routing and Preble's T_hbal
    bound an instance's lead the same way, by a ratio)."""
    return holder_finish <= guard * best_finish


class PinPrefix(Guard):
    name = "pin"
    needs_prefix_index = True

    def __init__(self, w_free: Annotated[float, Help(W_FREE_HELP, ge=0, le=1)] = 0.5,
                 wait_model: Annotated[WaitModel, Help("how `finish` counts the work ahead (see `finish`)")]
                 = "batched") -> None:
        self.slack = SlackBook(w_free)
        self.wait_model: WaitModel = wait_model
        self.stats = {"pinned": 0, "replicated": 0}

    def review(self, chosen: InstanceState, d: Decision) -> InstanceState:
        cs, view = d.call, d.view
        if view.prefix_index is None or cs.query.query.deadline is not None:
            return chosen
        holders = [k for k, i in enumerate(d.candidates) if view.cached_tokens(cs, i) * 2 > cs.input_tokens]
        if not holders or any(d.candidates[k] is chosen for k in holders):
            return chosen
        finish = finishes(d, self.wait_model)
        holder = min(holders, key=lambda k: finish[k])
        picked = next(k for k, i in enumerate(d.candidates) if i is chosen)
        if pinned(finish[holder], finish[picked], 1.0 + self.slack.weight(d)):
            self.stats["pinned"] += 1
            return d.candidates[holder]
        self.stats["replicated"] += 1
        return chosen
