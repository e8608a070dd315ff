"""Scheduling policies: global dispatch (which instance) and local queues (which call
next), one per module, chosen by name (`registry`). The contract they implement is
`base`: `DispatchPolicy` and `QueuePolicy`."""

from flowserve.policies.base import DispatchPolicy, QueuePolicy
from flowserve.policies.registry import (
    DISPATCH_POLICIES,
    QUEUE_POLICIES,
    QueueFactory,
    build_policy,
    make_dispatch,
    queue_factory,
)

__all__ = [
    "DISPATCH_POLICIES",
    "QUEUE_POLICIES",
    "DispatchPolicy",
    "QueueFactory",
    "QueuePolicy",
    "build_policy",
    "make_dispatch",
    "queue_factory",
]
