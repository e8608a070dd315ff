"""Earliest predicted finish: send each call where the work already promised to the
instance plus the call's own predicted time there is smallest.

    finish_i = outstanding_i + t_comp(call, i)

`outstanding_i` is the predicted seconds of work queued and running on instance i (the
core's account, Hexgen's t_queue); `t_comp` is the core's cache-aware estimate of the
call on i's hardware. Faster hardware, a shorter queue and a cached prefix all lower it.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve import CallState, ClusterView, DispatchPolicy, InstanceState


def finish_time(outstanding_s: float, t_comp_s: float) -> float:
    """finish_i = outstanding_i + t_comp(call, i)."""
    return outstanding_s + t_comp_s


class EarliestFinish(DispatchPolicy):
    name = "earliest_finish"
    needs_prefix_index = True  # t_comp then counts the prefix each instance caches

    def __init__(self, tie_break: str = "dispatched") -> None:
        if tie_break not in ("dispatched", "name"):
            raise ValueError(f"tie_break must be 'dispatched' or 'name', got {tie_break!r}")
        self.tie_break = tie_break

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        def key(inst: InstanceState) -> tuple[float, object]:
            tie = inst.dispatched if self.tie_break == "dispatched" else inst.name
            return finish_time(inst.outstanding, view.t_comp(cs, inst)), tie

        return min(candidates, key=key)
