"""Users' own workflows served at `/v1/workflows/NAME` (`gateway.workflows: {NAME: {app:
REF, ...kwargs}}`), REF naming the class as `flowserve.workflows` resolves it; simulated
as `{kind: app, app: REF}` (`flowserve.workloads.app`).

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
from flowserve.workflows import check_arguments, construct, workflow_class


def user_workflow(name: str, settings: Mapping[str, Any]) -> WorkflowDef:
    """`gateway.workflows.NAME: {app: REF, ...kwargs}` as a served workflow."""
    kwargs = {k: v for k, v in settings.items() if k != "app"}
    ref = settings["app"]
    if not isinstance(ref, str):
        raise ConfigError(f"gateway.workflows.{name}.app: expected a string, got {ref!r}")
    cls = workflow_class(ref)
    check_arguments(cls, kwargs, f"gateway.workflows.{name}")
    doc = (inspect.getdoc(cls) or f"user workflow {ref}").splitlines()[0]
    tools: Mapping[str, Callable[[Mapping[str, Any]], Any]] = dict(cls.tools)

    takes_model = "model" in inspect.signature(cls).parameters and "model" not in kwargs

    def build(inputs: Mapping[str, Any], _settings: Mapping[str, Any], model: str | None) -> Workflow:
        if model is not None:
            if not takes_model:
                raise RequestError(f"model: workflow {name!r} chooses its own models (its class takes no `model`)")
            inputs = {**inputs, "model": model}
        return construct(cls, kwargs, inputs)

    return WorkflowDef(name, doc, build, tools=lambda _s: tools)
