"""`prefill_harm`: what the call's prefill on each instance costs the calls running there,
in seconds.

    x_i = n_i · prefill_i(uncached_i)

n_i calls running on i (peer replicas' included); prefill_i(uncached_i) the cost model's
seconds for the prompt tokens i does not cache. An engine with chunked prefill runs a
prefill inside the iterations that advance its running decodes, so each running call's
next tokens come later by about the prefill's compute: a call that misses the cache where
many calls run delays them all, one that hits it delays them little. `batch_harm` counts
the longer decode steps of a bigger batch; this counts the prefill that interrupts them.

A cost in seconds (unit `s`): its score is 1 − x_i / S, S the largest seconds cost of the
decision.
"""

from __future__ import annotations

from flowserve.policies.scoring.plugin import CostScorer, Decision


def prefill_delay(running: int, prefill_s: float) -> float:
    """Seconds a prefill of `prefill_s` adds to `running` decoding calls together."""
    return max(running, 0) * max(prefill_s, 0.0)


class PrefillHarm(CostScorer):
    name = "prefill_harm"
    needs_prefix_index = True
    unit = "s"

    def cost(self, d: Decision) -> list[float]:
        cs, view = d.call, d.view
        out = []
        for inst in d.candidates:
            n = len(inst.running) + inst.peer_running
            if not n:
                out.append(0.0)
                continue
            cached = min(view.cached_tokens(cs, inst), max(cs.input_tokens - 1, 0))
            out.append(prefill_delay(n, inst.cost.prefill_time(cs.input_tokens - cached, cached)))
        return out
