"""The sans-IO scheduler core: `SchedulerCore` takes events and returns plain-data
commands; drivers read it through its query API only.

What policies see is public too: the contract they implement (`policy`: `DispatchPolicy`,
`QueuePolicy`, `QueueFactory`, `DriverServices`), the state of calls, queries and
instances (`state`), the read-only `ClusterView` (`view`) and what it hands out
(`readers`), and the call lifecycle (`lifecycle`). The books behind the core (`_runs`,
`_binding`, `_calls`, `_instances`, `_ops`, `_pool`, `_leaders`) are private.
"""

from flowserve.core.lifecycle import CallStatus
from flowserve.core.policy import DispatchPolicy, DriverServices, QueueFactory, QueuePolicy
from flowserve.core.records import CallRecord, InstanceStatus
from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import CallState, InstanceState, OpState, QueryState
from flowserve.core.view import ClusterView

__all__ = [
    "CallRecord",
    "CallState",
    "CallStatus",
    "ClusterView",
    "DispatchPolicy",
    "DriverServices",
    "InstanceState",
    "InstanceStatus",
    "OpState",
    "QueryState",
    "QueueFactory",
    "QueuePolicy",
    "SchedulerCore",
]
