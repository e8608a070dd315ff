"""The configuration reference: every config model's fields with type, default and
description, read from the pydantic models themselves."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from flowserve.config import ClusterConfig, InstanceConfig, ModelArch
from flowserve.host.settings import GatewaySettings
from flowserve.kvevents.config import KVEventsConfig
from flowserve.workloads.registry import WORKLOAD_KINDS

INTRO = """\
# Configuration reference

Generated from the configuration models (`python -m flowserve.docgen`); every field a
file may hold is listed here, and any other field is refused by name. A serving YAML
(`flowserve serve --config`) is a cluster file with an optional `gateway:` section;
`flowserve simulate --cluster` reads the same file and leaves `gateway:` out.
"""

CONSTRAINTS = ((at.Gt, "gt", ">"), (at.Ge, "ge", "≥"), (at.Lt, "lt", "<"), (at.Le, "le", "≤"),
               (at.MinLen, "min_length", "length ≥"), (at.MaxLen, "max_length", "length ≤"))


def sections() -> list[tuple[str, str, list[type[BaseModel]]]]:
    """(heading, what the section is, its models) in the page's order."""
    kinds: dict[type[BaseModel], None] = dict.fromkeys(WORKLOAD_KINDS.values())
    return [
        ("Cluster and serving files", "`--cluster FILE`, `flowserve serve --config FILE`: the instances.",
         [ClusterConfig, InstanceConfig, KVEventsConfig, ModelArch]),
        ("The `gateway:` section", "The gateway's settings in a serving YAML.",
         [GatewaySettings, *_nested({GatewaySettings: None})]),
        ("Workload files", "`--workload FILE`: one mapping whose `kind:` names the generator "
         f"({', '.join(f'`{k}`' for k in WORKLOAD_KINDS)}).", [*kinds, *_nested(kinds)]),
    ]


def _nested(models: Mapping[type[BaseModel], None]) -> Iterator[type[BaseModel]]:
    """Models that only appear inside others (a `dag` workload's nodes)."""
    seen = set(models)
    for model in models:
        for field in model.model_fields.values():
            for inner in _models_in(field.annotation):
                if inner not in seen:
                    seen.add(inner)
                    yield inner


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def type_name(annotation: Any) -> str:
    """A field's type as a reader of YAML sees it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin in (dict, Mapping):
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if annotation is Any:
        return "any"
    return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
        getattr(annotation, "__name__", ""), str(annotation))


def bounds(field: FieldInfo) -> str:
    parts = []  # lower bounds first, whatever order the annotations gave them in
    for kind, attr, sign in CONSTRAINTS:
        for meta in field.metadata:
            if isinstance(meta, kind):
                parts.append(f"{sign} {getattr(meta, attr)}")
    return ", ".join(parts)


def default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        return "see its section" if isinstance(value, BaseModel) else f"`{value}`"
    if field.default is PydanticUndefined:
        return "required"
    return yaml_value(field.default)


def yaml_value(value: Any) -> str:
    """A default as it is written in YAML."""
    if value is None:
        return "null"
    if value == "":
        return '`""`'
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def model_section(model: type[BaseModel]) -> str:
    doc = " ".join((model.__doc__ or "").split())
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = type_name(field.annotation)
        limit = bounds(field)
        desc = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {kind}{f' ({limit})' if limit else ''} | {default(field)} | {desc} |")
    return f"### {model.__name__}\n\n{doc + chr(10) + chr(10) if doc else ''}" + "\n".join(rows) + "\n"


def config_reference() -> str:
    out = [INTRO]
    for heading, what, models in sections():
        out.append(f"## {heading}\n\n{what}\n")
        out += [model_section(m) for m in models]
    return "\n".join(out)


def undescribed() -> list[str]:
    """`Model.field` of every field without a description."""
    return [f"{m.__name__}.{name}" for _, _, models in sections() for m in models
            for name, f in m.model_fields.items() if not f.description]
