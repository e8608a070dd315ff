"""The search space of a scoring profile (`flowserve.policies.scoring`): what `flowserve
tune` may change, each a `Knob` named as `with_params` sets it.

* every scorer's weight (`PART.weight`): uniform in [0, max(4 · w, 4)] (0 switches it off);
  `extra` scorers join the profile at weight 0, so the search may switch them on;
* every parameter of its scorers and guards with a finite default: a positive number
  log-uniform in [d / 4, 4 · d] (an integer ≥ 1 as an integer), 0 uniform in [0, 1], each
  within the range its help declares (`Help(..., ge=, le=)`); a bool or a `Literal` one of
  its values; block sizes and seeds are kept (they say what the profile emulates, not how
  it weighs);
* the profile's `prefix_window_s` (log-uniform around it) and `shares_prefills`.

A value a part refuses (out of its own range) fails that trial alone.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flowserve.core.params import Parameter, parameters
from flowserve.errors import ConfigError
from flowserve.policies.scoring.catalog import SCORERS, part_class
from flowserve.policies.scoring.profile import PartSpec, ProfileSpec, with_params

KEPT = frozenset({"block_size", "seed"})


@dataclass(frozen=True)
class Knob:
    """One value the search sets: a number in [low, high] (log-scaled, an integer) or one of `choices`."""

    key: str
    default: Any
    low: float = 0.0
    high: float = 1.0
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()


def number_knob(key: str, default: float, integer: bool = False, low: float | None = None,
                high: float | None = None) -> Knob | None:
    """A parameter's range around its default, within the range its help declares (None: a
    default nothing can be searched around)."""
    if isinstance(default, bool) or not isinstance(default, int | float) or not math.isfinite(default) or default < 0:
        return None
    if default == 0:
        lo, hi, log = 0.0, 1.0, False
    elif integer:
        lo, hi, log = max(1, int(default) // 4), max(int(default) * 4, 2), True
    else:
        lo, hi, log = default / 4, default * 4, True
    lo, hi = max(lo, low if low is not None else lo), min(hi, high if high is not None else hi)
    if integer:
        lo, hi = math.ceil(lo), math.floor(hi)
    if not lo < hi or not lo <= default <= hi or (log and lo <= 0):
        return None
    return Knob(key, int(default) if integer else float(default), lo, hi, log, integer)


def parameter_knob(key: str, p: Parameter, default: Any) -> Knob | None:
    if p.annotation is bool and isinstance(default, bool):
        return Knob(key, default, choices=(True, False))
    if typing.get_origin(p.annotation) is typing.Literal:
        return Knob(key, default, choices=typing.get_args(p.annotation))
    if p.annotation in (int, float):
        return number_knob(key, default, p.annotation is int, p.low, p.high)
    return None


def with_scorers(spec: ProfileSpec, extra: Sequence[str]) -> ProfileSpec:
    """The profile with `extra` scorers at weight 0 (ConfigError for an unknown name)."""
    known = {p.name for p in spec.scorers}
    added = []
    for name in extra:
        if name not in SCORERS:
            raise ConfigError(f"--scorer: unknown scorer {name!r}; known: {', '.join(SCORERS)}")
        if name not in known:
            added.append(PartSpec(name, {}, 0.0))
            known.add(name)
    return replace(spec, scorers=(*spec.scorers, *added))


def search_space(spec: ProfileSpec) -> list[Knob]:
    """Every knob of the profile (module docstring), in the profile's order."""
    knobs = [Knob(f"{p.name}.weight", p.weight, 0.0, max(4 * p.weight, 4.0)) for p in spec.scorers]
    for kind, p in spec.parts():
        if kind not in ("scorer", "guard"):
            continue
        for q in parameters(part_class(kind, p.name)):
            if q.name in KEPT:
                continue
            knob = parameter_knob(f"{p.name}.{q.name}", q, p.params.get(q.name, q.default))
            if knob is not None:
                knobs.append(knob)
    if spec.prefix_window_s:
        window = number_knob("prefix_window_s", spec.prefix_window_s)
        if window is not None:
            knobs.append(window)
    knobs.append(Knob("shares_prefills", spec.shares_prefills, choices=(True, False)))
    return knobs


def defaults(knobs: Sequence[Knob]) -> dict[str, Any]:
    return {k.key: k.default for k in knobs}


def suggest(trial: Any, knobs: Sequence[Knob]) -> dict[str, Any]:
    """The values an optuna trial draws for the knobs."""
    out: dict[str, Any] = {}
    for k in knobs:
        if k.choices:
            out[k.key] = trial.suggest_categorical(k.key, list(k.choices))
        elif k.integer:
            out[k.key] = trial.suggest_int(k.key, int(k.low), int(k.high), log=k.log)
        else:
            out[k.key] = trial.suggest_float(k.key, k.low, k.high, log=k.log)
    return out


def profile_with(spec: ProfileSpec, values: Mapping[str, Any], name: str | None = None) -> ProfileSpec:
    """The profile with the knobs' values set (ConfigError when a part refuses one)."""
    tuned = with_params(spec, dict(values), f"dispatch profile {spec.name!r}")
    return replace(tuned, name=name or tuned.name)
