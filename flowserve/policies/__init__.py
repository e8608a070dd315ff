"""Policy registries: a policy is chosen by its name in a config string."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowserve.policies.base import DispatchPolicy, QueuePolicy, build_policy
from flowserve.policies.dynamo import DynamoKV
from flowserve.policies.fcfs import FCFS
from flowserve.policies.flowserve_dispatch import FlowserveDispatch
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.hexgen import HexgenWB
from flowserve.policies.least_load import LeastLoad
from flowserve.policies.llmd import LLMD
from flowserve.policies.power_of_two import PowerOfTwo
from flowserve.policies.preble import PrebleE2
from flowserve.policies.prefix_affinity import PrefixAffinity
from flowserve.policies.prefix_groups import PrefixGroups
from flowserve.policies.round_robin import RoundRobin
from flowserve.policies.sglang import SglangCacheAware
from flowserve.policies.topology import Topology
from flowserve.policies.urgency import UrgencyQueue

DISPATCH_POLICIES: dict[str, type] = {
    cls.name: cls for cls in (RoundRobin, LeastLoad, HexgenWB, PrebleE2, PrefixAffinity,
                               SglangCacheAware, LLMD, DynamoKV, PowerOfTwo, FlowserveDispatch)
}
QUEUE_POLICIES: dict[str, type] = {
    cls.name: cls for cls in (FCFS, UrgencyQueue, PrefixGroups, Topology, FlowserveQueue)
}


def make_dispatch(name: str, params: Mapping[str, Any] | None = None) -> DispatchPolicy:
    return build_policy("dispatch", DISPATCH_POLICIES, name, params)


def queue_factory(name: str, params: Mapping[str, Any] | None = None) -> Callable[[], QueuePolicy]:
    """Validates now; each instance then gets its own queue object."""
    build_policy("queue", QUEUE_POLICIES, name, params)
    return lambda: build_policy("queue", QUEUE_POLICIES, name, params)


__all__ = [
    "DISPATCH_POLICIES",
    "QUEUE_POLICIES",
    "DispatchPolicy",
    "QueuePolicy",
    "make_dispatch",
    "queue_factory",
]
