"""`prefill_harm`: what the call's prefill on each instance costs the calls running there,
in seconds.

    x_i = n_i · (iteration_i(u_i prefill tokens + the n_i decodes) − iteration_i(the n_i decodes))

n_i calls running on i (peer replicas' included) with Σ context C_i; u_i the prompt tokens i
does not cache (of a prefix only believed cached, the share `speculative` counts as
cached); `iteration_i` the cost model's seconds for one engine iteration. An engine with
chunked prefill runs a prefill inside the iterations that advance its running decodes, so
each running call's next tokens come later by what the prefill adds to those iterations —
its compute where the batch is compute-bound, little where the decodes are memory-bound:
a call that misses the cache where many calls run delays them all, one that hits it
delays them little. `batch_harm` counts
the longer decode steps of a bigger batch; this counts the prefill that interrupts them.

A cost in seconds (unit `s`): its score is 1 − x_i / S, S the largest seconds cost of the
decision.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import CostScorer, Decision
from flowserve.policies.scoring.scorers.finish import (
    SPECULATIVE_HELP,
    believed_cached,
    check_credit,
    running_batches,
)
from flowserve.policies.scoring.slack import backlog
from flowserve.profiles.cost_model import prefill_attended


def prefill_delay(cost, new_tokens: int, cached_tokens: int, running: int, running_context: float) -> float:
    """Seconds a prefill of `new_tokens` (after `cached_tokens`) adds to `running` decoding
    calls together: each waits for the iteration it rides in to take longer by that much."""
    if running <= 0 or new_tokens <= 0:
        return 0.0
    alone = cost.iteration_time(0, 0.0, running, running_context)
    mixed = cost.iteration_time(new_tokens, prefill_attended(new_tokens, cached_tokens), running, running_context)
    return running * max(mixed - alone, 0.0)


class PrefillHarm(CostScorer):
    name = "prefill_harm"
    needs_prefix_index = True
    unit = "s"

    def __init__(self, speculative: Annotated[float, Help(SPECULATIVE_HELP)] = 1.0,
                 by_pressure: Annotated[bool, Help("weigh it by the cluster's pressure (`backlog`: the share of "
                                                   "instances with calls waiting, or their mean occupancy)")]
                 = False) -> None:
        self.speculative = check_credit(speculative)
        self.by_pressure = by_pressure

    def cost(self, d: Decision) -> list[float]:
        cs = d.call
        w = d.once("backlog", lambda: backlog(d.candidates)) if self.by_pressure else 1.0
        out = []
        batches = running_batches(d)
        for inst, believed, batch in zip(d.candidates, believed_cached(d, self.speculative), batches, strict=True):
            if batch is None:
                out.append(0.0)
                continue
            cached = min(believed, max(cs.input_tokens - 1, 0))
            out.append(w * prefill_delay(inst.cost, cs.input_tokens - cached, cached, batch[0], batch[1]))
        return out
