"""Policies by name: the registries of built-in policies, and their construction from
config strings (`--dispatch NAME --set dispatch.PARAM=VALUE`, YAML `dispatch_params:`).
A name is a built-in policy, one an installed package registers in the entry-point group
`flowserve.policies`, or an import path `package.module:Class` to a class deriving from
`DispatchPolicy` or `QueuePolicy`.

A parameter given as a string ('0.3', 'on') is coerced to the constructor parameter's
declared type; an unknown name, an unknown parameter or a value the policy refuses is a
`ConfigError` naming it. Queue policies come as a `QueueFactory`: each instance gets its
own queue object, and the core reads the class's declarations without building one.
"""

from __future__ import annotations

import copy
import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flowserve.core.policy import BINDINGS, DispatchPolicy, QueuePolicy
from flowserve.errors import ConfigError
from flowserve.plugins import POLICY_GROUP, is_import_path, load_class, registered
from flowserve.policies.autellix import AutellixBalancer
from flowserve.policies.dynamo import DynamoKV
from flowserve.policies.fcfs import FCFS
from flowserve.policies.flowserve_dispatch import FlowserveDispatch
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.hexgen import HexgenWB
from flowserve.policies.least_load import LeastLoad
from flowserve.policies.llmd import LLMD
from flowserve.policies.llmd_latency import LLMDPredictedLatency
from flowserve.policies.plas import ATLASQueue, PLASQueue
from flowserve.policies.power_of_two import PowerOfTwo
from flowserve.policies.preble import PrebleE2
from flowserve.policies.prefix_affinity import PrefixAffinity
from flowserve.policies.prefix_groups import PrefixGroups
from flowserve.policies.round_robin import RoundRobin
from flowserve.policies.sglang import SglangCacheAware
from flowserve.policies.slo.dispatch import SLOAwareDispatch
from flowserve.policies.topology import Topology
from flowserve.policies.urgency import UrgencyQueue

DISPATCH_POLICIES: dict[str, type[DispatchPolicy]] = {
    cls.name: cls for cls in (RoundRobin, LeastLoad, HexgenWB, PrebleE2, PrefixAffinity,
                               SglangCacheAware, LLMD, DynamoKV, PowerOfTwo, AutellixBalancer, FlowserveDispatch,
                               SLOAwareDispatch, LLMDPredictedLatency)
}
PolicyKind = Literal["dispatch", "queue"]
PolicyRef = str | type | DispatchPolicy | QueuePolicy  # a name or import path, a class, or a ready object
QUEUE_POLICIES: dict[str, type[QueuePolicy]] = {
    cls.name: cls for cls in (FCFS, UrgencyQueue, PrefixGroups, Topology, PLASQueue, ATLASQueue, FlowserveQueue)
}


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Config strings ('0.3', 'on') to the constructor parameter's declared type."""
    target = annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None:
            return None
        if isinstance(value, Mapping) and any(typing.get_origin(a) in (dict, Mapping) for a in args):
            return value  # the constructor reads the mapping (e.g. tenant_weights: {gold: 3})
        target = args[0] if len(args) == 1 else str
    if typing.get_origin(target) is typing.Literal:
        allowed = typing.get_args(target)
        if value not in allowed:
            raise ConfigError(f"parameter {name!r} must be one of {list(allowed)}, got {value!r}")
        return value
    try:
        if target is bool:
            if isinstance(value, str):
                low = value.lower()
                if low in ("on", "true", "yes", "1"):
                    return True
                if low in ("off", "false", "no", "0"):
                    return False
                raise ValueError(value)
            return bool(value)
        if target in (int, float, str):
            if isinstance(value, Mapping | list):
                raise TypeError(value)
            return target(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"parameter {name!r} expects {getattr(target, '__name__', target)}, got {value!r}"
        ) from None
    return value


def _base(kind: PolicyKind) -> tuple[Mapping[str, type], type]:
    return (DISPATCH_POLICIES, DispatchPolicy) if kind == "dispatch" else (QUEUE_POLICIES, QueuePolicy)


def policy_name(ref: PolicyRef) -> str:
    """How a policy reference reads in reports: its name, or its class's import path."""
    if isinstance(ref, str):
        return ref
    cls = ref if isinstance(ref, type) else type(ref)
    builtin = DISPATCH_POLICIES.get(cls.name) or QUEUE_POLICIES.get(cls.name)
    return cls.name if builtin is cls else f"{cls.__module__}:{cls.__qualname__}"


def policy_class(kind: PolicyKind, name: PolicyRef) -> type:
    """The class behind a policy reference: a class, an object, a built-in name, a name an
    installed package registers in the `flowserve.policies` entry-point group, or an import
    path (`package.module:Class`). It must derive from the kind's base class."""
    registry, base = _base(kind)
    if not isinstance(name, str):
        cls = name if isinstance(name, type) else type(name)
        if not issubclass(cls, base):
            raise ConfigError(f"{kind} policy {policy_name(name)!r}: {cls.__name__} does not derive from "
                              f"{base.__module__}.{base.__qualname__}")
        return cls
    cls = registry.get(name)
    if cls is not None:
        return cls
    plugged = registered(POLICY_GROUP)
    if name in plugged:
        return load_class(plugged[name], base, f"{kind} policy {name!r} (entry point {POLICY_GROUP})")
    if is_import_path(name):
        return load_class(name, base, f"{kind} policy")
    known = ", ".join(sorted({*registry, *plugged}))
    raise ConfigError(f"unknown {kind} policy {name!r}; known: {known}, or an import path 'package.module:Class'")


def build_policy(kind: PolicyKind, ref: PolicyRef, params: Mapping[str, Any] | None = None) -> Any:
    """A new policy object: the class `ref` names instantiated with `params` (or a copy of a
    ready-made policy object), with clear errors for bad names, parameters and classes that
    do not implement the contract."""
    cls = policy_class(kind, ref)
    name = policy_name(ref)
    if not isinstance(ref, str | type):  # a ready-made object: each run and instance gets its own copy
        if params:
            raise ConfigError(f"{kind} policy {name!r}: parameters go to the constructor, not to a ready object")
        return copy.deepcopy(ref)
    sig = inspect.signature(cls)
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # a third-party class's unresolvable annotations: take values as given
        hints = {}
    params = dict(params or {})
    binding = params.pop("binding", None) if kind == "dispatch" else None
    if binding is not None and binding not in BINDINGS:
        raise ConfigError(f"parameter 'binding' must be one of {list(BINDINGS)}, got {binding!r}")
    kwargs = {}
    for key, value in params.items():
        if key not in sig.parameters:
            known = ", ".join(sig.parameters) or "none"
            raise ConfigError(f"{kind} policy {name!r} has no parameter {key!r} (parameters: {known})")
        kwargs[key] = _coerce(key, value, hints.get(key, Any))
    missing = sorted(cls.__abstractmethods__) if inspect.isabstract(cls) else []
    if missing:
        raise ConfigError(f"{kind} policy {name!r}: class {cls.__name__} does not implement {', '.join(missing)}")
    try:
        policy = cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{kind} policy {name!r}: {e}") from None
    if binding is not None:
        policy.binding = binding
    return policy


def make_dispatch(ref: PolicyRef, params: Mapping[str, Any] | None = None) -> DispatchPolicy:
    return build_policy("dispatch", ref, params)


@dataclass(frozen=True)
class NamedQueueFactory:
    """A queue policy by name and parameters, validated once: calling it builds one
    instance's queue; `cls` carries the policy's declarations (the core's
    `flowserve.core.policy.QueueFactory`)."""

    name: PolicyRef
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        build_policy("queue", self.name, self.params)  # fail now, with the reason

    @property
    def cls(self) -> type[QueuePolicy]:
        return policy_class("queue", self.name)

    def __call__(self) -> QueuePolicy:
        return build_policy("queue", self.name, self.params)


def queue_factory(name: PolicyRef, params: Mapping[str, Any] | None = None) -> NamedQueueFactory:
    return NamedQueueFactory(name, dict(params or {}))
