"""`outstanding`: the work already promised to each instance, in seconds (Hexgen's t_queue,
Eq. 3: Σ predicted t_comp of the calls queued at or running on it, peer replicas' included).

    x_i = t_queue_i

A cost in seconds (unit `s`): its score is 1 − x_i / S, S the largest seconds cost of the
decision. Beside `finish` it weighs the backlog itself — the decode work queued behind the
engine's batch included — where `finish` counts what delays this call.
"""

from __future__ import annotations

from flowserve.policies.scoring.plugin import CostScorer, Decision


class Outstanding(CostScorer):
    name = "outstanding"
    unit = "s"

    def cost(self, d: Decision) -> list[float]:
        return [max(i.outstanding, 0.0) for i in d.candidates]
