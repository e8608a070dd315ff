"""Policy registries: a policy is chosen by its name in a config string."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowserve.policies.base import DispatchPolicy, QueuePolicy, build_policy
from flowserve.policies.dispatch import LeastLoad, RoundRobin
from flowserve.policies.hexgen import HexgenWB, UrgencyQueue
from flowserve.policies.preble import PrebleE2, PrefixGroups
from flowserve.policies.prefix_affinity import PrefixAffinity
from flowserve.policies.queue import FCFS, Topology

DISPATCH_POLICIES: dict[str, type] = {
    cls.name: cls for cls in (RoundRobin, LeastLoad, HexgenWB, PrebleE2, PrefixAffinity)
}
QUEUE_POLICIES: dict[str, type] = {cls.name: cls for cls in (FCFS, UrgencyQueue, PrefixGroups, Topology)}


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
