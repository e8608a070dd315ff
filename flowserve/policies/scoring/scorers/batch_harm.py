"""`batch_harm`: what the call would add to the decode steps of the calls running on each
instance, in seconds (its externality; flowserve).

    harm_i = n · steps · (step(n + 1, C + c) − step(n, C))

n calls running on i with Σ context C, the call's own decode steps and mean context c;
`step` is i's cost model's decode step (Orca/vLLM iteration-level batching). 0 where
nothing runs. A cost in seconds (unit `s`): its score is 1 − harm_i / S, S the largest
seconds cost of the decision.
"""

from __future__ import annotations

from flowserve.policies.scoring.plugin import CostScorer, Decision
from flowserve.policies.scoring.scorers.finish import call_steps, running_batches


def externality(cost, steps: int, own_context: float, running: int, running_context: float) -> float:
    """Seconds the call adds to the n running calls together: each decode step of the batch
    gets longer by step(n + 1, C + c) − step(n, C), for about the call's own steps."""
    if steps <= 0 or running <= 0:
        return 0.0
    return running * steps * (cost.decode_step_time(running + 1, running_context + own_context)
                              - cost.decode_step_time(running, running_context))


class BatchHarm(CostScorer):
    name = "batch_harm"
    unit = "s"

    def cost(self, d: Decision) -> list[float]:
        steps, own = call_steps(d.call)
        return [0.0 if batch is None else externality(inst.cost, steps, own, batch[0], batch[1])
                for inst, batch in zip(d.candidates, running_batches(d), strict=True)]
