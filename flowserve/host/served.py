"""The workflows a host serves (`POST /v1/workflows/NAME`): the built-in ones and a
user's own (`gateway.workflows.NAME.app`), each prepared once at composition (databases,
schemas: bad settings fail before serving), its tools registered with the driver's tool
runner and its factory with the core's workflow registry."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from functools import partial
from typing import Any

import orjson

from flowserve.apps.base import WorkflowDef
from flowserve.apps.registry import builtin_workflows
from flowserve.apps.user import user_workflow
from flowserve.errors import ConfigError
from flowserve.graph.workflow import Workflow
from flowserve.host.driver import LiveDriver
from flowserve.host.settings import GatewaySettings
from flowserve.types.work import WorkflowRef


def app_ref_name(name: str) -> str:
    """The factory name a served workflow registers with the core (apart from the driver's own)."""
    return f"app:{name}"


def app_ref(name: str, inputs: Mapping[str, Any], model: str | None) -> WorkflowRef:
    """A query of the served workflow `name` with these inputs (JSON) and model."""
    return WorkflowRef(app_ref_name(name), (orjson.dumps(dict(inputs)), model))


def build_app(wf: WorkflowDef, settings: Mapping[str, Any], inputs: bytes, model: str | None) -> Workflow:
    """A served workflow's object for a query: its inputs travel as JSON bytes (plain,
    immutable data in the `QueryArrived` event)."""
    return wf.build(orjson.loads(inputs), settings, model)


class ServedWorkflows:
    def __init__(self, settings: GatewaySettings, driver: LiveDriver,
                 workflows: Mapping[str, WorkflowDef] | None = None) -> None:
        """workflows: the definitions served (default: the built-in ones), beside a
        user's own from `gateway.workflows`."""
        self.defs: dict[str, WorkflowDef] = dict(workflows if workflows is not None else builtin_workflows())
        for name, wf_settings in settings.workflows.items():
            if "app" in wf_settings:  # a user's own Workflow class
                if name in self.defs:
                    raise ConfigError(f"gateway.workflows.{name}: {name!r} is a built-in workflow; serve your "
                                      f"app under another name")
                self.defs[name] = user_workflow(name, wf_settings)
        # workflows prepare now (databases, schemas), so bad settings fail before serving
        self.prepared: dict[str, Mapping[str, Any]] = {
            name: wf.prepare(settings.workflows.get(name, {})) if wf.prepare else settings.workflows.get(name, {})
            for name, wf in self.defs.items()}
        for name, wf in self.defs.items():
            if wf.tools is not None:
                driver.tools.register(wf.tools(self.prepared[name]))
            driver.workflows.register(app_ref_name(name), partial(build_app, wf, self.prepared[name]))
        unknown = sorted(set(settings.workflows) - set(self.defs))
        if unknown:
            raise ConfigError(f"gateway.workflows: no workflow {unknown}; registered: {sorted(self.defs)}")

    def cleanup(self) -> None:
        """The files the workflows prepared (temporary databases)."""
        for prepared in self.prepared.values():
            for path in prepared.get("_cleanup", ()):
                shutil.rmtree(path, ignore_errors=True)
