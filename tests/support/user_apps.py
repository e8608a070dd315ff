"""A user's own workflows, as an application team would write them (tests import them by path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from flowserve.graph.nodes import NodeResult
from flowserve.graph.workflow import Graph, Workflow


class Summarize(Workflow):
    """Summarize a document in two steps: outline, then write."""

    name = "summarize"

    def __init__(self, document: str, style: str = "plain", words: int = 8) -> None:
        if words < 1:
            raise ValueError("words must be positive")
        self.document, self.style, self.words = document, style, words

    def start(self, g: Graph) -> None:
        outline = g.llm("outline", ["Outline this document:\n", self.document], max_tokens=self.words)
        g.tool("lookup", "lookup", query=outline)
        g.llm("write", [f"Write a {self.style} summary from the outline:\n", outline], max_tokens=2 * self.words,
              after=["lookup"])

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return {"summary": results["write"].text, "looked_up": results["lookup"].value}

    tools: ClassVar[dict[str, Any]] = {"lookup": lambda args: f"{len(str(args['query']).split())} words looked up"}


class Quiz(Workflow):
    """Two chat turns on a real model: a question, then a follow-up that carries the first
    answer (a step handle inside a message), as a chat agent written as a workflow would."""

    name = "quiz"

    def __init__(self, question: str, follow_up: str, words: int = 12) -> None:
        self.question, self.follow_up, self.words = question, follow_up, words

    def start(self, g: Graph) -> None:
        first = g.llm("first", messages=[{"role": "user", "content": self.question}], max_tokens=self.words)
        g.llm("second", messages=[{"role": "user", "content": self.question}, {"role": "assistant", "content": first},
                                  {"role": "user", "content": self.follow_up}], max_tokens=self.words)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return {"first": results["first"].text, "second": results["second"].text}


class NotAWorkflow:
    pass


def broken_factory() -> None:
    raise RuntimeError("not a class")


class Faulty(Workflow):
    """A workflow with bugs of its own, chosen by `fault`: its constructor raises, its
    `start` raises, or its `output` is no JSON value."""

    name = "faulty"

    def __init__(self, fault: str = "none") -> None:
        if fault == "init":
            raise RuntimeError("the constructor's own bug")
        self.fault = fault

    def start(self, g: Graph) -> None:
        if self.fault == "start":
            raise KeyError("the start's own bug")
        g.llm("only", ["Say something."], max_tokens=2)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        if self.fault == "output":
            raise ZeroDivisionError("the output's own bug")
        if self.fault == "not-json":
            return {"text": results["only"].text, "seen": {object()}}
        return {"text": results["only"].text}
