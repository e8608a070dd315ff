"""Policies by name: the registries of built-in policies, and their construction from
config strings (`--dispatch NAME --set dispatch.PARAM=VALUE`, YAML `dispatch_params:`).
A name is a built-in policy, a shipped scoring profile (`flowserve.policies.scoring`),
one an installed package registers in the entry-point group `flowserve.policies`, or an
import path `package.module:Class` to a class deriving from `DispatchPolicy` or
`QueuePolicy`. A dispatch policy may also be a scoring profile: a file path (it looks
like one: a `.yaml`/`.yml`/`.json` suffix or a directory separator) or a mapping.

A parameter given as a string ('0.3', 'on') is coerced to the constructor parameter's
declared type; an unknown name, an unknown parameter or a value the policy refuses is a
`ConfigError` naming it. Queue policies come as a `QueueFactory`: each instance gets its
own queue object, and the core reads the class's declarations without building one.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flowserve.core.params import construct, parameters
from flowserve.core.policy import BINDINGS, DispatchPolicy, QueuePolicy
from flowserve.errors import ConfigError
from flowserve.plugins import POLICY_GROUP, is_import_path, load_class, registered
from flowserve.policies.autellix import AutellixBalancer
from flowserve.policies.fcfs import FCFS
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.hexgen import HexgenWB
from flowserve.policies.least_load import LeastLoad
from flowserve.policies.plas import ATLASQueue, PLASQueue
from flowserve.policies.power_of_two import PowerOfTwo
from flowserve.policies.preble import PrebleE2
from flowserve.policies.prefix_affinity import PrefixAffinity
from flowserve.policies.prefix_groups import PrefixGroups
from flowserve.policies.round_robin import RoundRobin
from flowserve.policies.scoring import (
    ProfileSpec,
    ScoredDispatch,
    load_profile,
    looks_like_path,
    part_class,
    with_params,
)
from flowserve.policies.scoring.profile import SHIPPED, shipped_profile
from flowserve.policies.sglang import SglangCacheAware
from flowserve.policies.topology import Topology
from flowserve.policies.urgency import UrgencyQueue

DISPATCH_POLICIES: dict[str, type[DispatchPolicy]] = {
    cls.name: cls for cls in (RoundRobin, LeastLoad, HexgenWB, PrebleE2, PrefixAffinity, SglangCacheAware, PowerOfTwo,
                               AutellixBalancer)
}
PolicyKind = Literal["dispatch", "queue"]
# a name, import path or profile path, a class, a ready object, or a scoring profile's mapping
PolicyRef = str | type | DispatchPolicy | QueuePolicy | Mapping[str, Any]
QUEUE_POLICIES: dict[str, type[QueuePolicy]] = {
    cls.name: cls for cls in (FCFS, UrgencyQueue, PrefixGroups, Topology, PLASQueue, ATLASQueue, FlowserveQueue)
}
PROFILES: tuple[str, ...] = SHIPPED  # shipped scoring profiles: dispatch policies by name
DISPATCH_NAMES: tuple[str, ...] = (*DISPATCH_POLICIES, *PROFILES)  # every built-in dispatch policy's name


def _profile_ref(kind: PolicyKind, ref: PolicyRef) -> bool:
    """Whether `ref` names a dispatch policy as a scoring profile (shipped, a file, a mapping)."""
    if kind != "dispatch":
        return False
    if isinstance(ref, Mapping):
        return True
    return isinstance(ref, str) and ref not in DISPATCH_POLICIES and (ref in PROFILES or looks_like_path(ref))


def profile_of(ref: str | Mapping[str, Any], params: Mapping[str, Any] | None = None) -> ProfileSpec:
    """The scoring profile `ref` names (shipped, a file or a mapping), with `params` set."""
    spec = shipped_profile(ref) if isinstance(ref, str) and ref in PROFILES else load_profile(ref)
    return with_params(spec, params or {}, f"dispatch profile {spec.name!r}")


def _base(kind: PolicyKind) -> tuple[Mapping[str, type], type]:
    return (DISPATCH_POLICIES, DispatchPolicy) if kind == "dispatch" else (QUEUE_POLICIES, QueuePolicy)


def policy_name(ref: PolicyRef) -> str:
    """How a policy reference reads in reports: its name (a profile's mapping: its `name`),
    or its class's import path."""
    if isinstance(ref, str):
        return ref
    if isinstance(ref, Mapping):
        return str(ref.get("name") or "profile")
    if isinstance(ref, ScoredDispatch):
        return ref.profile.name
    cls = ref if isinstance(ref, type) else type(ref)
    name = getattr(cls, "name", None)  # a class that is no policy at all has none
    builtin = isinstance(name, str) and (DISPATCH_POLICIES.get(name) or QUEUE_POLICIES.get(name))
    return name if builtin is cls and isinstance(name, str) else f"{cls.__module__}:{cls.__qualname__}"


def policy_class(kind: PolicyKind, name: PolicyRef) -> type:
    """The class behind a policy reference: a class, an object, a built-in name, a name an
    installed package registers in the `flowserve.policies` entry-point group, or an import
    path (`package.module:Class`). It must derive from the kind's base class."""
    registry, base = _base(kind)
    if _profile_ref(kind, name):
        return ScoredDispatch
    if isinstance(name, Mapping):
        raise ConfigError(f"{kind} policy: a mapping is a dispatch scoring profile, not a {kind} policy")
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
    ready-made policy object; a scoring profile with its parts' parameters set), with clear
    errors for bad names, parameters and classes that do not implement the contract."""
    cls = policy_class(kind, ref)
    name = policy_name(ref)
    params = dict(params or {})
    binding = params.pop("binding", None) if kind == "dispatch" else None
    if binding is not None and binding not in BINDINGS:
        raise ConfigError(f"parameter 'binding' must be one of {list(BINDINGS)}, got {binding!r}")
    if _profile_ref(kind, ref):
        assert isinstance(ref, str | Mapping)
        policy = ScoredDispatch(profile_of(ref, params))
    elif not isinstance(ref, str | type):  # a ready-made object: each run and instance gets its own copy
        if params or binding is not None:
            raise ConfigError(f"{kind} policy {name!r}: parameters go to the constructor, not to a ready object")
        return copy.deepcopy(ref)
    else:
        policy = construct(cls, params, f"{kind} policy {name!r}")
    if binding is not None:
        policy.bind_when(binding)
    return policy


def parameter_names(kind: PolicyKind, ref: PolicyRef) -> set[str]:
    """The parameters a policy takes (a profile's: `PART.PARAM`, `PART.weight` of scorers)."""
    if _profile_ref(kind, ref):
        assert isinstance(ref, str | Mapping)
        spec = profile_of(ref)
        names = {f"{p.name}.weight" for p in spec.scorers} | {"shares_prefills", "prefix_window_s"}
        for part_kind, p in spec.parts():
            names |= {f"{p.name}.{q.name}" for q in parameters(part_class(part_kind, p.name))}
        return names | {"binding"}
    names = set(inspect.signature(policy_class(kind, ref)).parameters)
    return names | {"binding"} if kind == "dispatch" else names


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
