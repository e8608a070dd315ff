"""`hbal`: Preble's load-balance guard (Preble §4.2, T_hbal): when the picked instance
would finish the call more than `t_hbal` × later than the instance that finishes it first
(`finish`), the call goes to that one. `stats`: `rebalanced`.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.preble_costs import overloaded
from flowserve.policies.scoring.plugin import Decision, Guard
from flowserve.policies.scoring.scorers.finish import WaitModel, finishes


class LoadBalanceGuard(Guard):
    name = "hbal"

    def __init__(self, t_hbal: Annotated[float, Help("the largest ratio of the pick's finish to the earliest "
                                                     "finish, ≥ 1 (Preble: 1.5)", ge=1)] = 1.5,
                 wait_model: Annotated[WaitModel, Help("how `finish` counts the work ahead (see `finish`)")]
                 = "batched") -> None:
        if t_hbal < 1.0:
            raise ValueError(f"t_hbal must be ≥ 1, got {t_hbal}")
        self.t_hbal = t_hbal
        self.wait_model: WaitModel = wait_model
        self.stats = {"rebalanced": 0}

    def review(self, chosen: InstanceState, d: Decision) -> InstanceState:
        finish = finishes(d, self.wait_model)
        light = min(range(len(d.candidates)), key=lambda k: finish[k])
        picked = next(k for k, i in enumerate(d.candidates) if i is chosen)
        if light != picked and overloaded(finish[picked], finish[light], self.t_hbal):
            self.stats["rebalanced"] += 1
            return d.candidates[light]
        return chosen
