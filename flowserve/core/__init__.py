"""The sans-IO scheduler core: `SchedulerCore` takes events and returns plain-data
commands; drivers read it through its query API only.

What policies see is public too: the state of calls, queries and instances
(`state`), the read-only `ClusterView` (`view`) and the call lifecycle (`lifecycle`).
The books behind the core (`_calls`, `_ops`, `_pool`) are private.
"""

from flowserve.core.lifecycle import CallStatus
from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import CallRecord, CallState, InstanceState, InstanceStatus, OpState, QueryState
from flowserve.core.view import ClusterView

__all__ = [
    "CallRecord",
    "CallState",
    "CallStatus",
    "ClusterView",
    "InstanceState",
    "InstanceStatus",
    "OpState",
    "QueryState",
    "SchedulerCore",
]
