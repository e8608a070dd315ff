"""Policy protocols and the by-name construction of policies from config strings.

A dispatch policy picks an instance for a ready call (global); a queue policy orders
one instance's waiting calls (local). Both only read the `ClusterView`. Optional hooks
let a policy watch every event the core handles (online tuning, rebalancing) and answer
with commands, which keeps them free of IO and clocks like the rest of the core.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.types.commands import Command
from flowserve.types.events import Event


@runtime_checkable
class DispatchPolicy(Protocol):
    """binding: "ready" binds a call to an instance as soon as it is ready (it then waits
    in that instance's queue); "late" keeps it in the core's ready pool until some
    instance has room, and chooses among the instances with room."""

    name: ClassVar[str]
    uses_deadline: ClassVar[bool]
    needs_prefix_index: ClassVar[bool]
    binding: str

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState: ...

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]: ...


@runtime_checkable
class QueuePolicy(Protocol):
    name: ClassVar[str]
    uses_deadline: ClassVar[bool]

    def push(self, cs: CallState) -> None: ...

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        """The call to release next (not removed until `remove`)."""
        ...

    def remove(self, cs: CallState, released: bool) -> None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[CallState]: ...


BINDINGS = ("ready", "late")


class Dispatch:
    """Defaults for the optional parts of a dispatch policy.

    tick_s: if set, drivers send a Tick event every tick_s seconds (policy clocks such
    as tuning windows run on event time only). binding: a policy's declared binding
    time; every dispatch policy also takes `binding` as a config parameter.
    """

    name: ClassVar[str] = ""
    uses_deadline: ClassVar[bool] = False
    needs_prefix_index: ClassVar[bool] = False
    binding: str = "ready"
    tick_s: float | None = None

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        return ()


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


def build_policy(kind: str, registry: Mapping[str, type], name: str,
                 params: Mapping[str, Any] | None = None) -> Any:
    """Instantiate registry[name](**params), with clear errors for bad names/params."""
    cls = registry.get(name)
    if cls is None:
        raise ConfigError(f"unknown {kind} policy {name!r}; known: {', '.join(sorted(registry))}")
    sig = inspect.signature(cls)
    hints = typing.get_type_hints(cls.__init__)
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
    try:
        policy = cls(**kwargs)
    except ValueError as e:
        raise ConfigError(f"{kind} policy {name!r}: {e}") from None
    if binding is not None:
        policy.binding = binding
    return policy
