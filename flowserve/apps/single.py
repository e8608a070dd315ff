"""The one-call workflow every OpenAI completion or chat request becomes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowserve.graph.nodes import CallEstimate, NodeResult
from flowserve.graph.prompt import Chat, Prompt, Toks, estimate_tokens
from flowserve.graph.workflow import Graph, Workflow
from flowserve.types.work import Tokens


class SingleCall(Workflow):
    """One LLM call: an OpenAI completion (its token ids) or chat request (its chat, which
    the gateway rendered and tokenized already: the core finds its tokens without IO)."""

    name = "single"

    def __init__(self, stage: str, prompt: Tokens | Chat, max_tokens: int, model: str | None,
                 params: Mapping[str, Any] | None = None) -> None:
        self.stage = stage
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.model = model
        self.params = dict(params or {})
        self._started = False

    @property
    def _parts(self) -> Prompt:
        return (self.prompt if isinstance(self.prompt, Chat) else Toks(self.prompt),)

    def start(self, g: Graph) -> None:
        self._started = True
        g.llm("call", self._parts, max_tokens=self.max_tokens, stage=self.stage, model=self.model,
              params=self.params)

    def expected_remaining(self) -> list[CallEstimate]:
        return [] if self._started else [CallEstimate(self.stage, estimate_tokens(self._parts))]

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        r = results["call"]
        return {"text": r.text or "", "output_tokens": r.output_tokens, "finish_reason": r.finish_reason or "length",
                "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens, "instance": r.instance}
