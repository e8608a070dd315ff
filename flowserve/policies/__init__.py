"""Scheduling policies: global dispatch (which instance) and local queues (which call
next), one per module, chosen by name (`registry`); dispatch may be composed of scorers
in a profile (`scoring`: `flowserve`, `llmd` and `dynamo_kv` are shipped profiles). The contract they implement lives in
the core that calls them (`flowserve.core.policy`: `DispatchPolicy`, `QueuePolicy`,
`QueueFactory`); `base` names it for policies written against `flowserve.policies.base`."""

from flowserve.core.policy import DispatchPolicy, QueueFactory, QueuePolicy
from flowserve.policies.registry import (
    DISPATCH_NAMES,
    DISPATCH_POLICIES,
    QUEUE_POLICIES,
    NamedQueueFactory,
    build_policy,
    make_dispatch,
    policy_name,
    queue_factory,
)

__all__ = [
    "DISPATCH_NAMES",
    "DISPATCH_POLICIES",
    "QUEUE_POLICIES",
    "DispatchPolicy",
    "NamedQueueFactory",
    "QueueFactory",
    "QueuePolicy",
    "build_policy",
    "make_dispatch",
    "policy_name",
    "queue_factory",
]
