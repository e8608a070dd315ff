"""What a served workflow registers: its name, how a request builds it, its settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flowserve.graph.workflow import Workflow


@dataclass(frozen=True)
class WorkflowDef:
    """A registered workflow: `build(inputs, settings, model)` validates the request's
    inputs (RequestError on bad input) and returns the query's workflow; `prepare`
    turns the gateway's settings for it into what `build` reads, once at start-up
    (ConfigError on bad settings)."""

    name: str
    description: str
    build: Callable[[Mapping[str, Any], Mapping[str, Any], str | None], Workflow]
    prepare: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    # tool executors the workflow's ops need beyond the driver's own (`sql`), from the
    # prepared settings: op name → function of the op's arguments (run in a worker thread)
    tools: Callable[[Mapping[str, Any]], Mapping[str, Callable[[Mapping[str, Any]], Any]]] | None = None
