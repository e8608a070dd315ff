"""The workload kinds by YAML `kind:`, the built-in workload names, and `load_workload`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from os import PathLike
from typing import Any

from flowserve.errors import ConfigError
from flowserve.schema import Strict, load_mapping, validate
from flowserve.workloads import agent_trace, preble
from flowserve.workloads.app import AppConfig
from flowserve.workloads.base import Workload
from flowserve.workloads.config import (
    AgentTraceConfig,
    ChessTraceConfig,
    EmbodiedAgentConfig,
    LLMSQLConfig,
    LongDocQAConfig,
    MixedConfig,
    PrebleConfig,
    ProgrammingConfig,
    Text2SQLConfig,
    ToolUseConfig,
    TraceConfig,
    VideoQAConfig,
)
from flowserve.workloads.dag import DagConfig
from flowserve.workloads.programs import ProgramsConfig
from flowserve.workloads.recorded import jsonl_kind
from flowserve.workloads.teola import TeolaConfig

WORKLOAD_KINDS: dict[str, type[Strict]] = {
    "llm_sql": LLMSQLConfig,
    "text2sql": Text2SQLConfig,
    "chess_trace": ChessTraceConfig,
    "agent_trace": AgentTraceConfig,
    "trace": TraceConfig,
    "dag": DagConfig,
    "tool_use": ToolUseConfig,
    "embodied_agent": EmbodiedAgentConfig,
    "programming": ProgrammingConfig,
    "video_qa": VideoQAConfig,
    "long_doc_qa": LongDocQAConfig,
    "mixed": MixedConfig,
    "programs": ProgramsConfig,
    "app": AppConfig,
    **dict.fromkeys(("search_gen", "naive_rag", "advanced_rag"), TeolaConfig),
}

BUILTIN_WORKLOADS: dict[str, dict[str, Any]] = {
    "text2sql": {"kind": "text2sql", "trace": "mixed", "rate": 0.5, "queries": 200},
    **{f"text2sql-{t}": {"kind": "text2sql", "trace": t, "rate": 0.5, "queries": 200}
       for t in ("financial", "formula1", "mixed")},
    **{name: {"kind": "chess_trace", "file": name, "rate": 0.5}
       for name in agent_trace.BUILTIN_TRACE_FILES},
    **{kind: {"kind": kind, "rate": 2.0, "queries": 500} for kind in preble.KINDS},
    "mixed": {"kind": "mixed", "rate": 2.0, "queries": 500},
    "programs": {"kind": "programs", "rate": 1.0, "queries": 300},
    # Teola's apps (on the built-in `teola` cluster), at `bench teola`'s high rates: the paper
    # baseline's busiest engine ~60 % busy (the embedder for RAG, one search at a time)
    **{kind: {"kind": kind, "rate": rate, "queries": 200}
       for kind, rate in (("search_gen", 1.7), ("naive_rag", 0.5), ("advanced_rag", 0.5))},
}


def workload_config(data: Mapping[str, Any], source: str) -> Any:
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in WORKLOAD_KINDS:
        raise ConfigError(f"{source}: kind: unknown workload kind {kind!r}; "
                          f"known: {', '.join(WORKLOAD_KINDS)}")
    return validate(WORKLOAD_KINDS[kind], dict(data), source)


OUTPUT_ROOM = 256  # tokens left for the answer when prompts are sized to a context


def load_workload(ref: str | PathLike[str] | Mapping[str, Any], overrides: Mapping[str, Any] | None = None,
                  max_context: int | None = None) -> Workload:
    """A built-in workload name, a workload YAML, a recorded JSONL trace, or a workload
    config as a mapping (`{"kind": ..., ...}`).

    `max_context` (the cluster's smallest serving context) sizes the prompts of Preble's
    generators (video_qa and long_doc_qa exceed 8k-32k contexts) unless the workload sets
    `max_prompt` itself."""
    if isinstance(ref, Mapping):
        data, source = dict(ref), "workload"
    elif not isinstance(ref, str | PathLike):
        raise ConfigError(f"workload: expected a built-in name, a workload YAML, a JSONL trace or a mapping, "
                          f"got {type(ref).__name__}")
    elif (ref := str(ref)).endswith(".jsonl"):
        data, source = jsonl_kind(ref), ref
    else:
        data, source = load_mapping(ref, BUILTIN_WORKLOADS, "workload")
    if overrides:
        data = {**data, **overrides}
    config = workload_config(data, source)
    if not isinstance(config, PrebleConfig) or config.max_prompt is not None or max_context is None:
        return config.build()
    limit = max_context - OUTPUT_ROOM
    if limit <= 100:
        raise ConfigError(f"{source}: the cluster's smallest context ({max_context} tokens) leaves no room "
                          f"for {config.kind} prompts")
    wl = config.model_copy(update={"max_prompt": limit}).build()
    note = (f"{config.kind}: prompts sized to the cluster's smallest context, {max_context} tokens "
            f"(max_prompt {limit}; set workload.max_prompt to choose)")
    return replace(wl, notes=(*wl.notes, note))
