"""LoRA adapters and served model names in the configuration (an instance's `models`,
`lora_adapters`, `max_loras`, `lora_load_s`): their checks, and the `LoraSpec` they make.

A request names a model: the base model, one of its other served names, or a LoRA
adapter; it goes only to the instances serving that name (`InstanceSpec.serves`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from flowserve.errors import ConfigError
from flowserve.types.specs import InstanceSpec, LoraSpec

DEFAULT_LOAD_S = 0.05  # an assumption (a small adapter copied into a GPU slot): measure yours
_SERVED = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")


def served_names(names: Sequence[str] | None) -> Sequence[str] | None:
    """Model or adapter names as written (ValueError naming a bad one)."""
    for name in names or []:
        if not _SERVED.fullmatch(name):
            raise ValueError(f"{name[:80]!r}: a model or adapter name is 1 to 200 characters without spaces or "
                             "control characters")
    return names


def check_lora(where: str, model: str | None, models: Sequence[str], adapters: Sequence[str] | None,
               settings: Mapping[str, Any]) -> None:
    """An instance's served names and LoRA settings (ValueError naming the fault): settings
    (`max_loras`, `lora_load_s`) only with adapters, at least one adapter, no name twice."""
    if adapters is None:
        for field, value in settings.items():
            if value is not None:
                raise ValueError(f"{where}: {field} is for an instance that serves lora_adapters")
    elif not adapters:
        raise ValueError(f"{where}: lora_adapters is empty: name at least one adapter, or leave it out")
    names = [n.lower() for n in (model or "", *models, *(adapters or ())) if n]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: {', '.join(map(repr, twice))} named twice: model, models and lora_adapters "
                         "name distinct models (case-insensitive)")


def lora_spec(adapters: Sequence[str] | None, max_loras: int | None, load_s: float | None) -> LoraSpec | None:
    if adapters is None:
        return None
    return LoraSpec(tuple(adapters), max_loras or 1, DEFAULT_LOAD_S if load_s is None else load_s)


def lora_fields(lora: LoraSpec | None) -> dict[str, Any]:
    """The instance fields that configure `lora` (a built-in cluster's)."""
    if lora is None:
        return {}
    return {"lora_adapters": list(lora.adapters), "max_loras": lora.max_loras, "lora_load_s": lora.load_s}


def adapters_apart(specs: Sequence[InstanceSpec]) -> None:
    """A name is a LoRA adapter everywhere it is served, or nowhere: a request naming it must
    get the same model whichever instance takes it (ConfigError otherwise)."""
    bases = {n.lower(): s.name for s in specs if s.kind == "llm" for n in (s.model, *s.aliases)}
    for s in specs:
        for a in s.engine.lora.adapters if s.engine.lora else ():
            if a.lower() in bases:
                raise ConfigError(f"cluster: {a!r} is a LoRA adapter on instance {s.name!r} and the base model (or "
                                  f"an alias of it) on {bases[a.lower()]!r}: give them different names")
