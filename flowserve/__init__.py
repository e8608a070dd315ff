"""flowserve: serve LLM applications on a heterogeneous cluster of LLM engines.

One sans-IO scheduler core (`flowserve.core`) is driven by two drivers: the
virtual-time simulator (`flowserve.sim`) and the live gateway (`flowserve.gateway`).

The public API is what `__all__` lists (docs/api.md): `simulate`, `compare`, `serve`, `epp`,
`sql.connect`, the program client (`client.program`), the workflow IR (`Workflow`, `Graph`), the policy contract
(`DispatchPolicy`, `QueuePolicy`, what they read, `PolicyHarness` to test them) and the
event and command types a policy sees. Names load on first use, so `import flowserve`
stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EVENTS = ("Event", "QueryArrived", "QueryInput", "QueryClosed", "QueryCancelled", "CallFinished", "CallProgress",
           "PrefillDone", "CallFailed", "CallCancelled", "OpFinished", "InstanceUp", "InstanceDown",
           "InstanceCapacity", "PrefixEvicted", "Tick", "Tokenized", "JobFinished")
_COMMANDS = ("Command", "SendCall", "CancelCall", "RunOp", "RunBatch", "Tokenize", "QueryDone", "StepDone",
             "QueryFailed", "PolicyChanged", "RunJob")
_WHERE: dict[str, str] = {
    **dict.fromkeys(("simulate", "compare", "serve", "epp", "SimulationResult"), "flowserve.api"),
    **dict.fromkeys(("Workflow", "Graph"), "flowserve.graph.workflow"),
    **dict.fromkeys(("DispatchPolicy", "QueuePolicy"), "flowserve.policies.base"),
    **dict.fromkeys(("CallState", "InstanceState", "QueryState", "OpState"), "flowserve.core.state"),
    "CallStatus": "flowserve.core.lifecycle",
    "ClusterView": "flowserve.core.view",
    "PolicyHarness": "flowserve.core.harness",
    **dict.fromkeys(_EVENTS, "flowserve.types.events"),
    **dict.fromkeys(_COMMANDS, "flowserve.types.commands"),
    **dict.fromkeys(("LLMCall", "ToolOp", "Query"), "flowserve.types.work"),
    "InstanceSpec": "flowserve.types.specs",
    **dict.fromkeys(("FlowserveError", "ConfigError"), "flowserve.errors"),
}
_MODULES = {"sql": "flowserve.sql", "client": "flowserve.client"}

__all__ = ["__version__", *_WHERE, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value: Any = importlib.import_module(_MODULES[name])
    elif name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'flowserve' has no attribute {name!r}")
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
