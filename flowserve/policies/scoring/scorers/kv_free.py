"""`kv_free`: each instance's free KV cache (llm-d/GIE's kv-cache-utilization-scorer).

    score_i = 1 − utilisation_i        ∈ [0, 1]

utilisation: the engine's reported KV in use over its capacity where it reports it
(`reports_capacity`), else the tokens of the calls running there (prompt + predicted
output) over the KV capacity, at most 1; 0 where the capacity is unknown.
"""

from __future__ import annotations

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Scorer


def kv_utilization(inst: InstanceState) -> float:
    """The share of the instance's KV cache in use (see the module docstring)."""
    cap = inst.kv_capacity
    if not cap:
        return 0.0
    if inst.spec.reports_capacity and inst.kv_free < cap:
        return min(1.0, max(0.0, 1.0 - inst.kv_free / cap))
    used = sum(c.input_tokens + c.predicted_output for c in inst.running.values())
    return min(1.0, used / cap)


class KVFree(Scorer):
    name = "kv_free"

    def score(self, d: Decision) -> list[float]:
        return [1.0 - kv_utilization(i) for i in d.candidates]
