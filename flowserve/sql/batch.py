"""One batch of rows as one query: a workflow of many independent LLM steps.

The core keeps the steps in its late-binding ready pool and releases them as instances
have room, in the planner's send order, so one statement can make 10⁵ calls without
one HTTP request per row reaching the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowserve.graph.nodes import NodeResult
from flowserve.graph.workflow import Graph, Workflow


def step_key(i: int) -> str:
    return f"r{i}"


class LLMBatch(Workflow):
    name = "llm_sql"

    def __init__(self, prompts: Sequence[str], max_tokens: Sequence[int], stage: str = "llm_sql",
                 model: str | None = None, params: Mapping[str, Any] | None = None,
                 after: Sequence[int | None] | None = None, chat: bool = False) -> None:
        assert len(prompts) == len(max_tokens)
        self.prompts = list(prompts)
        self.max_tokens = list(max_tokens)
        self.stage = stage
        self.model = model
        self.params = dict(params or {"temperature": 0.0})
        self.after = list(after or [None] * len(self.prompts))  # a warm-up step each step waits for
        self.chat = chat  # each prompt as one user message in the model's chat template (instruct models)

    def start(self, g: Graph) -> None:
        for i, (p, m) in enumerate(zip(self.prompts, self.max_tokens, strict=True)):
            j = self.after[i]
            prompt = {"messages": [{"role": "user", "content": p}]} if self.chat else {"prompt": [p]}
            g.llm(step_key(i), **prompt, max_tokens=m, stage=self.stage, model=self.model, params=self.params,
                  after=() if j is None else (step_key(j),))

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        answers = []
        for i in range(len(self.prompts)):
            r = results.get(step_key(i))
            answers.append(None if r is None else
                           {"text": r.text, "error": r.error, "output_tokens": r.output_tokens,
                            "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens})
        return {"answers": answers}
