"""Nodes of a query's workflow graph (the IR's steps) and what finishing one yields.

An `LLMNode` is an inference request, an `OpNode` any other step (a tool the driver
runs: SQL, retrieval, ...). Both carry room for primitive-level graphs: a `kind`
(e.g. a prefill or decode half of an LLM call, an embedding batch) and annotations
(`batchable`, `splittable`) that graph passes read and rewrite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.errors import FailureKind
from flowserve.graph.prompt import Chat, Out, Prompt, Segment, output_segment_id, refs, required, value_parts

EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class LLMNode:
    key: str
    stage: str
    prompt: Prompt
    max_tokens: int
    deps: tuple[str, ...] = ()
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # sampling parameters (plain data)
    kind: str = "llm"  # "llm" (prefill + decode) or "prefill" (a partial prefill: max_tokens 1)
    splittable: bool = False  # its output may be handed on part by part
    chain: tuple[str, ...] = ()  # deps that only order (module chain), carrying no data

    @property
    def refs(self) -> tuple[str, ...]:
        return refs(self.prompt)

    @property
    def chat(self) -> Chat | None:
        """The chat this call renders, when its prompt is one."""
        return self.prompt[0] if len(self.prompt) == 1 and isinstance(self.prompt[0], Chat) else None

    @property
    def needs(self) -> tuple[str, ...]:
        """The steps it reads that it cannot run without (see `Out.optional`)."""
        return required(self.prompt)


@dataclass(frozen=True, slots=True)
class OpNode:
    key: str
    stage: str
    op: str
    deps: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    batchable: bool = False  # may share one engine batch with other queries' ops
    chain: tuple[str, ...] = ()  # deps that only order (module chain), carrying no data

    @property
    def refs(self) -> tuple[str, ...]:
        return tuple(v.step for v in self.args.values() if isinstance(v, Out))

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(v.step for v in self.args.values() if isinstance(v, Out) and not v.optional)


Node = LLMNode | OpNode


@dataclass(frozen=True, slots=True)
class NodeResult:
    """What a finished node produced; the runtime keeps it in the query's object store.

    LLM calls: the answer (text live, None simulated), its token counts and where it ran;
    tool ops: their value or error (`error`: why, for people and prompts; `error_kind`:
    what failed, `flowserve.errors.FailureKind`). `missing`: the step has no output and did not run
    (a part beyond those its source produced, or a step that needed such a part).
    """

    output_tokens: int = 0
    text: str | None = None
    error: str | None = None
    stage: str = ""
    value: Any = None
    finish_reason: str | None = None
    instance: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    first_token: float | None = None
    finished: float | None = None
    ready: float | None = None  # when the call became ready to run (its latency's start)
    # LLM calls: the engine's answer beyond its text, as plain JSON (`tool_calls`, `logprobs`)
    extra: Mapping[str, Any] | None = None
    missing: bool = False
    error_kind: FailureKind | None = None

    def parts(self, query_id: int, key: str) -> Prompt:
        """How this result reads inside a later prompt (`Out(key)`)."""
        if self.text is not None:
            return value_parts(self.text)
        if self.value is not None:
            return value_parts(self.value)
        if self.output_tokens > 0:
            return (Segment(output_segment_id(query_id, key), self.output_tokens),)
        return ()


@dataclass(frozen=True, slots=True)
class CallEstimate:
    """An LLM call a query is still expected to make (not yet in its graph)."""

    stage: str
    input_tokens: int
    output_tokens: int | None = None  # None: ask the output predictor
    count: float = 1.0
