"""Reading configuration data: YAML files and pydantic validation with one-line errors.

Errors come out as `ConfigError` naming the file, the field and the problem, so the CLI
can print one line and exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from flowserve.errors import ConfigError


class Strict(BaseModel):
    """Every config model: unknown fields, inf/nan and coercions (`true` as 1, `2.5` as 2,
    `"3"` as 3) are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def at_most(limit: int | float, why: str) -> AfterValidator:
    """A field bound whose error says where the limit comes from."""

    def check(v: Any) -> Any:
        if v is not None and v > limit:
            raise ValueError(f"{v:,} is above the limit of {limit:,} ({why})")
        return v

    return AfterValidator(check)


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


def read_text(path: str | Path, what: str = "") -> str:
    """A UTF-8 text file; anything else is a ConfigError naming the file (and `what` it is)."""
    name = f"{what} {str(path)!r}" if what else repr(str(path))
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {name}: {e.strerror or e}") from None
    except ValueError as e:  # a NUL in the path
        raise ConfigError(f"cannot read {name}: {e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bom = " (it starts with a UTF-16 byte-order mark)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ConfigError(f"{path}: not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start}{bom}; "
                          f"save the file as UTF-8") from None


def read_yaml(path: str | Path) -> dict[str, Any]:
    data = parse_yaml(read_text(path), str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(e).split())}") from None
    except ValueError as e:  # a malformed timestamp or number under an explicit tag
        raise ConfigError(f"{source}: not valid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None


def looks_like_path(ref: str) -> bool:
    """Whether a reference names a file rather than a built-in: it has a suffix or a folder."""
    p = Path(ref)
    return bool(p.suffix) or len(p.parts) > 1 or ref.startswith(".")


def load_mapping(ref: str, builtins: Mapping[str, Mapping[str, Any]], what: str) -> tuple[dict[str, Any], str]:
    """A built-in by its bare name (never shadowed by a file or folder of that name in the
    working directory: `./NAME` reads the file), else a YAML file."""
    if ref in builtins and not looks_like_path(ref):
        return dict(builtins[ref]), f"{what} {ref!r}"
    if Path(ref).exists():
        return read_yaml(ref), ref
    raise ConfigError(f"{what} {ref!r} is neither a file nor a built-in name "
                      f"({', '.join(builtins)})")
