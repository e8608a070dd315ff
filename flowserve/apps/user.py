"""Users' own workflows: a `Workflow` class named by import path (`package.module:Class`)
or by a name an installed package registers in the `flowserve.workflows` entry-point
group, served at `/v1/workflows/NAME` (`gateway.workflows: {NAME: {app: REF, ...kwargs}}`)
and simulated as `{kind: app, app: REF}` (`flowserve.workloads.app`).

A query builds the class with the configured keyword arguments and the request's
`input` object (`Class(**kwargs, **input)`). Everything that can be checked before
serving is checked at start-up, with one line: the reference, the base class, and the
configured arguments against the constructor's signature. A class may name the tools its
ops use (`tools = {"op": function}`, each called with the op's arguments in a worker
thread by the gateway); workflows themselves never do IO.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from flowserve.apps.base import WorkflowDef
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


def user_workflow(name: str, settings: Mapping[str, Any]) -> WorkflowDef:
    """`gateway.workflows.NAME: {app: REF, ...kwargs}` as a served workflow."""
    kwargs = {k: v for k, v in settings.items() if k != "app"}
    ref = settings["app"]
    if not isinstance(ref, str):
        raise ConfigError(f"gateway.workflows.{name}.app: expected a string, got {ref!r}")
    cls = workflow_class(ref)
    check_arguments(cls, kwargs, f"gateway.workflows.{name}")
    doc = (inspect.getdoc(cls) or f"user workflow {ref}").splitlines()[0]
    tools: Mapping[str, Callable[[Mapping[str, Any]], Any]] = dict(getattr(cls, "tools", None) or {})

    takes_model = "model" in inspect.signature(cls).parameters and "model" not in kwargs

    def build(inputs: Mapping[str, Any], _settings: Mapping[str, Any], model: str | None) -> Workflow:
        if model is not None:
            if not takes_model:
                raise RequestError(f"model: workflow {name!r} chooses its own models (its class takes no `model`)")
            inputs = {**inputs, "model": model}
        return construct(cls, kwargs, inputs)

    return WorkflowDef(name, doc, build, tools=lambda _s: tools)
