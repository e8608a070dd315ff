r"""Digest: a workflow of your own, served and simulated by flowserve without installing it.

A document's sections are summarised in parallel, a tool step (plain Python, run by the
gateway) picks the document's keywords, and one last call writes the digest from the
summaries and the keywords. flowserve's scheduler sees the whole graph: the query's
deadline, the parallel summaries, and the digest call still to come.

Served: `examples/serve-sim.yaml` names the class under `gateway.workflows.digest`
(an import path, found from the repository root), so

    flowserve serve --config examples/serve-sim.yaml --port 8000 &
    curl -s http://127.0.0.1:8000/v1/workflows/digest -H 'authorization: Bearer sk-local-1' \
         -d '{"input": {"document": "Prefix caches keep prompts.\n\nSchedulers order calls."}}'

Simulated: `examples/workloads/digest.yaml` (`kind: app`) builds the same class from
`examples/workflows/digest-inputs.jsonl`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from flowserve.graph.nodes import NodeResult
from flowserve.graph.workflow import Graph, Workflow

STOP_WORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "in", "is", "it",
                        "its", "of", "on", "or", "that", "the", "their", "this", "to", "was", "were", "which", "with"})


def keywords(args: Mapping[str, Any]) -> list[str]:
    """The tool: the document's most frequent words that are not stop words."""
    words = re.findall(r"[a-z][a-z-]+", str(args["text"]).lower())
    counts = Counter(w for w in words if w not in STOP_WORDS)
    return [w for w, _ in counts.most_common(int(args["top"]))]


class Digest(Workflow):
    """Digest a document: each section summarised in parallel, its keywords, then one digest."""

    name = "digest"  # its name in metrics, traces and the scheduler's stage priors
    tools: ClassVar[dict[str, Any]] = {"keywords": keywords}  # op name → the function the gateway runs

    def __init__(self, document: str, words: int = 48, max_sections: int = 8) -> None:
        self.sections = [s.strip() for s in document.split("\n\n") if s.strip()]
        if not self.sections:
            raise ValueError("document: no text")
        if len(self.sections) > max_sections:
            raise ValueError(f"document: {len(self.sections)} sections, at most {max_sections}")
        self.words = words

    def start(self, g: Graph) -> None:
        summaries = [g.llm(f"summary{i}", ["Summarise this section in one sentence:\n", section],
                           max_tokens=self.words, stage="summary")
                     for i, section in enumerate(self.sections)]
        found = g.tool("keywords", "keywords", text="\n".join(self.sections), top=5)
        numbered = [part for i, s in enumerate(summaries) for part in (f"\n{i + 1}. ", s)]
        g.llm("digest", ["Write a short digest of a document from its section summaries:", *numbered,
                         "\nKeywords: ", found, "\nDigest:"], max_tokens=2 * self.words)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return {"digest": results["digest"].text, "keywords": results["keywords"].value,
                "sections": len(self.sections)}
