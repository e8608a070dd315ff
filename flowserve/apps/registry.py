"""The workflows the gateway serves at `/v1/workflows/{name}`.

Every app is a `flowserve.graph.workflow.Workflow`, so it runs unchanged in the
simulator (modelled lengths, oracle tool outcomes) and in the gateway (real text, real
tools).
"""

from __future__ import annotations

from flowserve.apps.base import WorkflowDef
from flowserve.apps.teola_served import ADVANCED_RAG, NAIVE_RAG, SEARCH_GEN
from flowserve.apps.text2sql import TEXT2SQL


def builtin_workflows() -> dict[str, WorkflowDef]:
    return {w.name: w for w in (TEXT2SQL, SEARCH_GEN, NAIVE_RAG, ADVANCED_RAG)}
