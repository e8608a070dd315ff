"""`uncached_work`: the work each instance's cache leaves undone for the call, in seconds
of the fastest hardware, weighed by what the call can afford (flowserve).

    x_i = w · t_cold(fastest) · t_comp(call, i) / t_cold(call, i)

`t_comp / t_cold` is the share of the call's work i's cached prefix leaves (1: nothing
cached); measured in seconds of the fastest candidate's cold run, so a slower GPU is not
penalised for being slower — only `finish` counts time. `w` (`flowserve.policies.scoring.
slack`) = max(the query's slack, the cluster's pressure): a tight query on a quiet
cluster takes the earliest finish, one with room to spare pays for cache reuse.

A cost in seconds (unit `s`): its score is 1 − x_i / S, S the largest seconds cost of the
decision. With `finish` (weight 1) and `batch_harm`, weight `efficiency` here gives
flowserve's score finish + harm + efficiency · w · t_cold(fastest) · share.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import CostScorer, Decision
from flowserve.policies.scoring.scorers.finish import t_comps
from flowserve.policies.scoring.slack import SlackBook

W_FREE_HELP = "w of deadline-free interactive calls (batch work takes 1, calls with a deadline their slack), in [0, 1]"


def uncached_share(t_comp_s: float, t_cold_s: float) -> float:
    """The share of a call's work a cached prefix leaves: t_comp / t_cold (1 when t_cold is 0)."""
    return t_comp_s / t_cold_s if t_cold_s > 0 else 1.0


class UncachedWork(CostScorer):
    name = "uncached_work"
    uses_deadline = True
    needs_prefix_index = True
    unit = "s"

    def __init__(self, w_free: Annotated[float, Help(W_FREE_HELP)] = 0.5) -> None:
        self.slack = SlackBook(w_free)

    def cost(self, d: Decision) -> list[float]:
        w = self.slack.weight(d)
        colds = [d.view.t_cold(d.call, i) for i in d.candidates]
        fastest = min(colds)
        return [w * fastest * uncached_share(tc, cold) for tc, cold in zip(t_comps(d), colds, strict=True)]
