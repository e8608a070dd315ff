"""Workflows the gateway serves: single requests and registered multi-step applications.

A live workflow is a `WorkflowProgram` (sans-IO, like every program the core runs) that
also reports an `output()` when its query is done. `SingleCall` is what
`/v1/completions` and `/v1/chat/completions` become: a one-node query. `TextProgram`
is the base of text workflows: their prompts are text, so an LLM step is two nodes — a
`tokenize` tool op the driver runs with the model's tokenizer, then the LLM call on
those token ids (the program stays free of IO, and the router's prefix index sees the
engine's real tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowserve.engines.backend import CallPayload
from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult, OpNode

TOKENIZE = "tokenize"


class LiveProgram(Protocol):
    def start(self) -> Sequence[Node]: ...

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]: ...

    def expected_remaining(self) -> Sequence[CallEstimate]: ...

    def output(self) -> dict[str, Any]: ...


class SingleCall:
    """One LLM call: an OpenAI completion or chat request."""

    def __init__(self, stage: str, prompt: tuple[int, ...], max_tokens: int, model: str | None,
                 payload: CallPayload) -> None:
        self.node = LLMNode("call", stage, prompt, max_tokens, model=model, payload=payload)
        self._started = False
        self.result: NodeResult | None = None

    def start(self) -> Sequence[Node]:
        self._started = True
        return [self.node]

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        self.result = result
        return ()

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return () if self._started else (CallEstimate(self.node.stage, len(self.node.prompt)),)

    def output(self) -> dict[str, Any]:
        r = self.result
        return {} if r is None else {"text": r.text or "", "output_tokens": r.output_tokens}


class TextProgram:
    """Base for workflows with text prompts (see the module docstring).

    Subclasses implement `begin()` and `on_text(key, text)` / `on_tool(key, result, error)`
    and issue steps with `llm(...)` and `tool(...)`; node keys must be unique per query.
    """

    def __init__(self, model: str | None) -> None:
        self.model = model
        self._llm_steps: dict[str, tuple[str, int, CallPayload]] = {}
        self.llm_calls = 0

    # ------------------------------------------------------------------ for subclasses

    def llm(self, key: str, stage: str, text: str, max_tokens: int,
            params: Mapping[str, Any] | None = None) -> Node:
        payload = CallPayload("completion", dict(params or {}), text=text)
        self._llm_steps[key] = (stage, max_tokens, payload)
        return OpNode(f"{key}#tok", TOKENIZE, TOKENIZE, args={"text": text, "model": self.model})

    def tool(self, key: str, stage: str, op: str, **args: Any) -> Node:
        return OpNode(key, stage, op, args=args)

    def begin(self) -> Sequence[Node]:
        raise NotImplementedError

    def on_text(self, key: str, text: str) -> Sequence[Node]:
        raise NotImplementedError

    def on_tool(self, key: str, result: Any, error: str | None) -> Sequence[Node]:
        raise NotImplementedError

    def output(self) -> dict[str, Any]:
        raise NotImplementedError

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return ()

    # ------------------------------------------------------------------ WorkflowProgram

    def start(self) -> Sequence[Node]:
        return self.begin()

    def on_done(self, node: Node, result: NodeResult) -> Sequence[Node]:
        if isinstance(node, OpNode) and node.op == TOKENIZE and node.key.endswith("#tok"):
            key = node.key[: -len("#tok")]
            stage, max_tokens, payload = self._llm_steps.pop(key)
            if result.error is not None:
                return self.on_tool(key, None, f"tokenization failed: {result.error}")
            self.llm_calls += 1
            return [LLMNode(key, stage, tuple(result.value), max_tokens, model=self.model,
                            payload=payload)]
        if isinstance(node, LLMNode):
            return self.on_text(node.key, result.text or "")
        return self.on_tool(node.key, result.value, result.error)


@dataclass(frozen=True)
class WorkflowDef:
    """A registered workflow: `build(inputs, settings, model)` validates the request's
    inputs (RequestError on bad input) and returns the query's program."""

    name: str
    description: str
    build: Callable[[Mapping[str, Any], Mapping[str, Any], str | None], LiveProgram]
    prepare: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None  # once at start-up


def builtin_workflows() -> dict[str, WorkflowDef]:
    from flowserve.apps.text2sql import TEXT2SQL

    return {w.name: w for w in (TEXT2SQL,)}
