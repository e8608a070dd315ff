"""A scoring profile: the filters, weighted scorers, picker and guards a dispatch decision
runs (`flowserve.policies.scoring.plugin`), written in YAML or inline, and the profiles
flowserve ships (`shipped/*.yaml`: `flowserve`, `llmd`, `dynamo_kv`).

    name: my-profile           # how reports name it (default: the file's name)
    description: ...
    filters: [healthy, {name: fits_context, with_output: true}]
    scorers:                   # at least one; weight ≥ 0 (default 1); other keys: the scorer's parameters
      - {name: finish, weight: 1}
      - {name: prefix_hit, weight: 2, block_size: 64}
      - {name: outstanding, weight: 1, classes: [batch]}   # only for batch calls (default: every call)
    picker: max_score          # the default
    guards: [pin]
    shares_prefills: true      # the core's prefill sharing (`DispatchPolicy.shares_prefills`)
    prefix_window_s: 0         # the prefix index's request-history window (null: the default)

Wherever a dispatch policy is named, a profile may be given instead: a file path (it
must look like one — a `.yaml`/`.yml`/`.json` suffix or a directory separator — so a
built-in name is never shadowed by a file), or a mapping (`gateway.dispatch: {scorers:
[...]}`). Its parts' parameters are set as `PART.PARAM` (`--set dispatch.finish.
wait_model=serial`, `dispatch_params: {uncached_work.weight: 2}`), or as a mapping per part.
Every fault is a `ConfigError` naming the profile, the entry and the field.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import Field

from flowserve.errors import ConfigError
from flowserve.policies.scoring.catalog import PartKind, build_part
from flowserve.schema import Strict, parse_yaml, read_yaml, validate
from flowserve.types.work import QUERY_CLASSES, QueryClass

PATH_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class PartSpec:
    """One part of a profile: its name (or import path), parameters, a scorer's weight, and
    the query classes whose calls it applies to (llm-d picks a scheduling profile per
    request; here a part may serve only `batch` or only `interactive` calls)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    weight: float = 1.0
    classes: tuple[QueryClass, ...] = QUERY_CLASSES


@dataclass(frozen=True)
class ProfileSpec:
    """A profile, validated: every part builds."""

    name: str
    scorers: tuple[PartSpec, ...]
    filters: tuple[PartSpec, ...] = ()
    picker: PartSpec = PartSpec("max_score")
    guards: tuple[PartSpec, ...] = ()
    description: str = ""
    shares_prefills: bool = True
    prefix_window_s: float | None = None

    def parts(self) -> list[tuple[PartKind, PartSpec]]:
        return ([("filter", p) for p in self.filters] + [("scorer", p) for p in self.scorers]
                + [("picker", self.picker)] + [("guard", p) for p in self.guards])

    def describe(self) -> dict[str, Any]:
        """The profile as the YAML that would rebuild it."""
        def entry(p: PartSpec, weighted: bool = False) -> dict[str, Any]:
            classes = {"classes": list(p.classes)} if p.classes != QUERY_CLASSES else {}
            return {"name": p.name, **({"weight": p.weight} if weighted else {}), **classes, **dict(p.params)}
        return {"name": self.name, "description": self.description,
                "filters": [entry(p) for p in self.filters], "scorers": [entry(p, True) for p in self.scorers],
                "picker": entry(self.picker), "guards": [entry(p) for p in self.guards],
                "shares_prefills": self.shares_prefills, "prefix_window_s": self.prefix_window_s}


class ProfileFile(Strict):
    """A profile's top level, as written."""

    name: str | None = Field(None, min_length=1, description="how reports name the profile")
    description: str = Field("", description="what the profile is for")
    # entries are checked one by one (`_part`), so an error names the entry
    filters: list[Any] = Field(default_factory=list, description="filters, in order")
    scorers: list[Any] = Field(min_length=1, description="scorers, added by weight")
    picker: Any = Field("max_score", description="the picker")
    guards: list[Any] = Field(default_factory=list, description="guards, in order")
    shares_prefills: bool = Field(True, description="the core's prefill sharing")
    prefix_window_s: float | None = Field(None, ge=0, description="the prefix index's request-history window")


def looks_like_path(ref: str) -> bool:
    """A profile file's name: a known suffix or a directory separator."""
    return ref.lower().endswith(PATH_SUFFIXES) or "/" in ref or os.sep in ref


def _weight(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: weight must be a finite number ≥ 0, got {value!r}")
    return float(value)


def _number(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{where}: expected a number, got {text!r}") from None


def _classes(value: Any, where: str) -> tuple[QueryClass, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or any(c not in QUERY_CLASSES for c in items):
        raise ConfigError(f"{where}: classes must name some of {list(QUERY_CLASSES)}, got {value!r}")
    return tuple(c for c in QUERY_CLASSES if c in items)


def _part(kind: PartKind, entry: Any, where: str) -> PartSpec:
    if isinstance(entry, str):
        spec = PartSpec(entry)
    elif isinstance(entry, Mapping):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: expected a 'name' (a {kind}'s name or import path), got {name!r}")
        if "weight" in entry and kind != "scorer":
            raise ConfigError(f"{where}: only scorers take a weight ({kind} {name!r})")
        if "classes" in entry and kind == "picker":
            raise ConfigError(f"{where}: the picker serves every call (no classes)")
        params = {k: v for k, v in entry.items() if k not in ("name", "weight", "classes")}
        if not all(isinstance(k, str) for k in params):
            raise ConfigError(f"{where}: parameter names must be strings")
        spec = PartSpec(name, params, _weight(entry.get("weight", 1.0), where),
                        _classes(entry.get("classes", list(QUERY_CLASSES)), where))
    else:
        raise ConfigError(f"{where}: expected a {kind}'s name or a mapping with 'name', got {entry!r}"[:300])
    build_part(kind, spec.name, spec.params, where)  # every fault now, with where it is
    return spec


def parse_profile(data: Any, source: str, default_name: str = "profile") -> ProfileSpec:
    """A profile from its mapping (`source`: how errors name it, e.g. "dispatch profile 'p.yaml'")."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping (scorers, filters, picker, guards), got "
                          f"{type(data).__name__}")
    top = validate(ProfileFile, dict(data), source)
    scorers = tuple(_part("scorer", e, f"{source}: scorers[{k}]") for k, e in enumerate(top.scorers))
    spec = ProfileSpec(
        name=top.name or default_name, description=top.description, scorers=scorers,
        filters=tuple(_part("filter", e, f"{source}: filters[{k}]") for k, e in enumerate(top.filters)),
        picker=_part("picker", top.picker, f"{source}: picker"),
        guards=tuple(_part("guard", e, f"{source}: guards[{k}]") for k, e in enumerate(top.guards)),
        shares_prefills=top.shares_prefills, prefix_window_s=top.prefix_window_s)
    seen: set[str] = set()
    for _, p in spec.parts():
        if p.name in seen:
            raise ConfigError(f"{source}: {p.name!r} appears twice (a part's parameters are set by its name)")
        seen.add(p.name)
    return spec


def with_params(spec: ProfileSpec, params: Mapping[str, Any], source: str) -> ProfileSpec:
    """The profile with parameters set: `PART.PARAM` or `PART.weight` keys, a mapping per part
    (`{PART: {PARAM: value}}`), or the profile's own fields (`shares_prefills`, `prefix_window_s`)."""
    if not params:
        return spec
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and "." not in key:
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    data = spec.describe()
    entries = {e["name"]: e for kind in ("filters", "scorers", "guards") for e in data[kind]}
    entries[data["picker"]["name"]] = data["picker"]
    for key, value in flat.items():
        part, dot, param = key.partition(".")
        if not dot:
            if key not in ("shares_prefills", "prefix_window_s"):
                raise ConfigError(f"{source} has no parameter {key!r}: set a part's as PART.PARAM (parts: "
                                  f"{', '.join(entries)}), or shares_prefills, prefix_window_s")
            data[key] = value
        elif part not in entries:
            raise ConfigError(f"{source} has no part {part!r} (parts: {', '.join(entries)})")
        elif param == "weight" and isinstance(value, str):  # from the command line: a number as text
            entries[part][param] = _number(value, f"{source}: {key}")
        else:
            entries[part][param] = value
    return parse_profile(data, source, spec.name)


SHIPPED = ("llmd", "llmd_lora", "dynamo_kv", "flowserve")  # the shipped profiles, in the order listings show them


def shipped_names() -> list[str]:
    """The profile files in `shipped/` (each is in `SHIPPED`: a test checks it)."""
    folder = resources.files("flowserve.policies.scoring").joinpath("shipped")
    return sorted(Path(f.name).stem for f in folder.iterdir() if f.name.endswith(".yaml"))


def shipped_profile(name: str) -> ProfileSpec:
    text = resources.files("flowserve.policies.scoring").joinpath("shipped", f"{name}.yaml").read_text()
    source = f"dispatch profile {name!r}"
    return parse_profile(parse_yaml(text, source), source, name)


def load_profile(ref: str | Mapping[str, Any]) -> ProfileSpec:
    """A profile from a file path or a mapping."""
    if isinstance(ref, Mapping):
        return parse_profile(ref, "dispatch profile (inline)", "inline")
    return parse_profile(read_yaml(ref), f"dispatch profile {ref!r}", Path(ref).stem)
