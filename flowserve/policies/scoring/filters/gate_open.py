"""`gate_open`: instances that would start the call now: a free engine slot, and below
the batch their queue lets the engine run (the `flowserve` queue's sweet-spot gate;
`QueuePolicy.batch_limit`), with nothing waiting ahead.

    keep_i = slots_free_i > 0 and |queue_i| = 0 and (limit_i is None or running_i < limit_i)

running_i counts peer replicas' calls on the engine too. Where every gate is closed the
filter is skipped (a filter never leaves no candidate) and the scorers decide.
"""

from __future__ import annotations

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter


def gate_open(slots_free: int, waiting: int, running: int, limit: int | None) -> bool:
    """Would an instance start one more call now (the module docstring)?"""
    return slots_free > 0 and waiting == 0 and (limit is None or running < limit)


class GateOpen(Filter):
    name = "gate_open"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return gate_open(inst.slots_free, len(inst.queue), len(inst.running) + inst.peer_running,
                         inst.queue.batch_limit(inst))
