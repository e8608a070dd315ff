"""`healthy`: instances that are up and have not failed this call.

    keep_i = i is up and i is not among the instances that failed the call

The core already hands a policy only the up instances, and those that failed the call
only when nothing else is left; in a profile this filter states it.
"""

from __future__ import annotations

from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter


class Healthy(Filter):
    name = "healthy"

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return inst.up and inst.name not in d.call.excluded
