"""Users' own workflow classes by reference: an import path (`package.module:Class`) or a
name an installed package registers in the `flowserve.workflows` entry-point group
(`[project.entry-points."flowserve.workflows"] NAME = "package.module:Class"`), checked
against the class's constructor before anything runs (`flowserve.apps.user` serves them,
`flowserve.workloads.app` simulates them).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from flowserve.errors import ConfigError, RequestError
from flowserve.graph.workflow import Workflow
from flowserve.plugins import WORKFLOW_GROUP, is_import_path, load_class, registered


def workflow_class(ref: str) -> type[Workflow]:
    """The Workflow class `ref` names: an import path, or an entry point of `flowserve.workflows`."""
    plugged = registered(WORKFLOW_GROUP)
    if ref in plugged:
        return load_class(plugged[ref], Workflow, f"workflow {ref!r} (entry point {WORKFLOW_GROUP})")
    if not is_import_path(ref):
        known = ", ".join(sorted(plugged)) or "none installed"
        raise ConfigError(f"workflow {ref!r}: expected an import path 'package.module:Class' or an entry point "
                          f"of {WORKFLOW_GROUP} ({known})")
    return load_class(ref, Workflow, "workflow")


def check_arguments(cls: type[Workflow], kwargs: Mapping[str, Any], what: str) -> None:
    """The configured arguments fit the constructor (the request supplies the rest)."""
    try:
        inspect.signature(cls).bind_partial(**kwargs)
    except TypeError as e:
        params = ", ".join(inspect.signature(cls).parameters) or "none"
        raise ConfigError(f"{what}: {cls.__name__}: {e} (its parameters: {params})") from None


def construct(cls: type[Workflow], kwargs: Mapping[str, Any], inputs: Mapping[str, Any]) -> Workflow:
    """One query's workflow object; a RequestError for inputs the class does not take."""
    fixed = sorted(set(kwargs) & set(inputs))
    if fixed:
        raise RequestError(f"input {fixed} is set by the gateway's configuration of this workflow")
    try:
        inspect.signature(cls).bind(**kwargs, **inputs)
    except TypeError as e:
        raise RequestError(f"{cls.__name__}: {e}") from None
    try:
        return cls(**kwargs, **inputs)
    except (TypeError, ValueError) as e:  # the class's own checks of its inputs
        raise RequestError(f"{cls.__name__}: {e}") from None
