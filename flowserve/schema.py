"""Reading configuration data: YAML files and pydantic validation with one-line errors.

Errors come out as `ConfigError` naming the file, the field and the problem, so the CLI
can print one line and exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from flowserve.errors import ConfigError


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _format(err: ValidationError, source: str) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (and {len(parts) - 3} more)" if len(parts) > 3 else ""
    return f"{source}: " + "; ".join(parts[:3]) + more


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, source: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format(e, source)) from None


def read_yaml(path: str | Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"cannot read {str(path)!r}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_mapping(ref: str, builtins: Mapping[str, Mapping[str, Any]], what: str) -> tuple[dict[str, Any], str]:
    if Path(ref).exists():
        return read_yaml(ref), ref
    if ref in builtins:
        return dict(builtins[ref]), f"{what} {ref!r}"
    raise ConfigError(f"{what} {ref!r} is neither a file nor a built-in name "
                      f"({', '.join(builtins)})")
