"""`prefill_harm`: what the call's prefill on each instance costs the calls running there,
in seconds.

    x_i = n_i · prefill_i(uncached_i)

n_i calls running on i (peer replicas' included); prefill_i(uncached_i) the cost model's
seconds for the prompt tokens i does not cache (of a prefix only believed cached, the share
`speculative` counts as cached). An engine with chunked prefill runs a
prefill inside the iterations that advance its running decodes, so each running call's
next tokens come later by about the prefill's compute: a call that misses the cache where
many calls run delays them all, one that hits it delays them little. `batch_harm` counts
the longer decode steps of a bigger batch; this counts the prefill that interrupts them.

A cost in seconds (unit `s`): its score is 1 − x_i / S, S the largest seconds cost of the
decision.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.policies.scoring.plugin import CostScorer, Decision
from flowserve.policies.scoring.scorers.finish import SPECULATIVE_HELP, believed_cached, check_credit
from flowserve.policies.scoring.slack import backlog


def prefill_delay(running: int, prefill_s: float) -> float:
    """Seconds a prefill of `prefill_s` adds to `running` decoding calls together."""
    return max(running, 0) * max(prefill_s, 0.0)


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
        for inst, believed in zip(d.candidates, believed_cached(d, self.speculative), strict=True):
            n = len(inst.running) + inst.peer_running
            if not n:
                out.append(0.0)
                continue
            cached = min(believed, max(cs.input_tokens - 1, 0))
            out.append(w * prefill_delay(n, inst.cost.prefill_time(cs.input_tokens - cached, cached)))
        return out
