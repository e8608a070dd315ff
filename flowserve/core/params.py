"""Parameters that carry their help: one mechanism for every policy, and every filter,
scorer, picker and guard of a scoring profile.

A constructor parameter is annotated `Annotated[T, Help("what it does, its range, its
source")]`; `Help` is a pydantic `Field` with that description, the same mechanism the
configuration's fields use, so the generated references (`flowserve.docgen`) read both
alike. `parameters(cls)` lists a class's parameters with type, default and help; the
registries coerce values by the plain type (`T`), which `typing.get_type_hints` without
extras gives.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field
from pydantic.fields import FieldInfo

from flowserve.errors import ConfigError

REQUIRED = inspect.Parameter.empty


def Help(text: str, *, ge: float | None = None, le: float | None = None) -> Any:
    """The help of one parameter, in its annotation, and the range it takes when it is a
    number (`ge`, `le`: what `flowserve tune` searches within; the class still checks it)."""
    return Field(description=" ".join(text.split()), ge=ge, le=le)


@dataclass(frozen=True, slots=True)
class Parameter:
    """One constructor parameter: name, plain type, default (`REQUIRED` when none) and help."""

    name: str
    annotation: Any
    default: Any
    help: str
    low: float | None = None  # the range `Help` declares (None: unbounded)
    high: float | None = None


def help_of(annotated: Any) -> str:
    """The `Help` text in an `Annotated[...]` annotation ('' when there is none)."""
    if typing.get_origin(annotated) is not typing.Annotated:
        return ""
    for meta in typing.get_args(annotated)[1:]:
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    return ""


def bounds_of(annotated: Any) -> tuple[float | None, float | None]:
    """The (ge, le) range the `Help` in an `Annotated[...]` annotation declares."""
    low = high = None
    if typing.get_origin(annotated) is typing.Annotated:
        for meta in typing.get_args(annotated)[1:]:
            for m in meta.metadata if isinstance(meta, FieldInfo) else ():
                low = getattr(m, "ge", low)
                high = getattr(m, "le", high)
    return low, high


def parameters(cls: type) -> list[Parameter]:
    """The parameters of `cls`'s constructor, in order (`self`, *args and **kwargs left out)."""
    try:
        full = typing.get_type_hints(cls.__init__, include_extras=True)
    except Exception:  # a third-party class's unresolvable annotations: no types, no help
        full = {}
    out = []
    for name, p in inspect.signature(cls).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        annotated = full.get(name, Any)
        plain = typing.get_args(annotated)[0] if typing.get_origin(annotated) is typing.Annotated else annotated
        out.append(Parameter(name, plain, p.default, help_of(annotated), *bounds_of(annotated)))
    return out


def undocumented(classes: typing.Iterable[type]) -> list[str]:
    """`Class.parameter` of every parameter without help."""
    return [f"{cls.__name__}.{p.name}" for cls in classes for p in parameters(cls) if not p.help]


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """A value given as a config string ('0.3', 'on') as the parameter's declared type; a
    mapping or list where the type wants one is kept. A value of the wrong type is a
    `ConfigError` naming the parameter."""
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
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(
            f"parameter {name!r} expects {getattr(target, '__name__', target)}, got {value!r}"
        ) from None
    return value


def construct(cls: type, params: Mapping[str, Any], what: str) -> Any:
    """`cls(**params)`, each value coerced to its parameter's type; an unknown parameter or a
    value the constructor refuses (`ValueError`, `TypeError`) is a `ConfigError` that
    starts with `what` (e.g. "dispatch policy 'flowserve'")."""
    known = {p.name: p for p in parameters(cls)}
    kwargs = {}
    for key, value in params.items():
        if key not in known:
            raise ConfigError(f"{what} has no parameter {key!r} (parameters: {', '.join(known) or 'none'})")
        try:
            kwargs[key] = coerce(key, value, known[key].annotation)
        except ConfigError as e:
            raise ConfigError(f"{what}: {e}") from None
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        raise ConfigError(f"{what}: class {cls.__name__} does not implement {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{what}: {e}") from None
