"""Code of the user's own, named in configuration: an import path (`package.module:Name`)
or a name an installed package registers in an entry-point group (`flowserve.policies`).
An import path names an installed module or one under the current directory (looked up
after the installed ones, as `python -m` would find it), so a module in a project's
folder needs no installation.

Everything that goes wrong while loading — a malformed path, a module that does not
import, a missing attribute, an object of the wrong kind — is a `ConfigError` of one line
that names the reference and the cause, so the CLI exits 2 and the gateway refuses to
start, before any work.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from importlib.metadata import entry_points
from typing import Any

from flowserve.errors import ConfigError

POLICY_GROUP = "flowserve.policies"
WORKFLOW_GROUP = "flowserve.workflows"
_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def is_import_path(ref: str) -> bool:
    """`package.module:Name` (a dotted module, a colon, a dotted attribute)."""
    return bool(_REF.match(ref))


def _search_current_directory() -> None:
    """The current directory is on the import path, after the installed packages (a console
    script such as `flowserve` does not put it there; `python -m` and `python -c` do)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def load_object(ref: str, what: str) -> Any:
    """The object `ref` (`package.module:Name`) names; `what` says what it should be."""
    if not is_import_path(ref):
        raise ConfigError(f"{what} {ref!r}: expected an import path 'package.module:Name'")
    module_name, _, attr = ref.partition(":")
    _search_current_directory()
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:  # the user's module may raise anything while importing
        raise ConfigError(f"{what} {ref!r}: cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what} {ref!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_class(ref: str, base: type, what: str) -> type:
    """A class named by import path that derives from `base`."""
    obj = load_object(ref, what)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        kind = f"class {obj.__name__}" if isinstance(obj, type) else type(obj).__name__
        raise ConfigError(f"{what} {ref!r}: {kind} does not derive from {base.__module__}.{base.__qualname__}")
    return obj


def registered(group: str) -> dict[str, str]:
    """Names installed packages register in an entry-point group → their import paths."""
    return {ep.name: ep.value for ep in entry_points(group=group)}
