"""`kind: search_gen | naive_rag | advanced_rag` — Teola's apps as simulated workloads.

  {kind: advanced_rag, rate: 0.3, queries: 200, seed: 0, arrival: poisson,
   doc_tokens: 40000, question_tokens: 40, answer_tokens: 120, query_tokens: 20}

Each query runs the app's `Workflow` (`flowserve.apps.teola`) on a modelled question and
document (segments); the oracle draws the LLM outputs (log-normal around the means),
where each expanded query ends (decode pipelining releases it there), and what every
retrieval returns (chunks of `chunk` tokens, search snippets). The core LLM is `model`
(Llama-2-13B, Teola §7), search-augmented generation's draft and judge run on
`judge_model` (Llama-2-7B); `null` lets any instance serve them. `search_error` /
`search_delay_s` model a search service that fails or is slow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import Field

from flowserve.apps.teola import AdvancedRAG, NaiveRAG, SearchGen
from flowserve.graph.oracle import TableOracle, ToolOutcome
from flowserve.graph.plan import Segment
from flowserve.graph.primitives import chunk_count
from flowserve.graph.workflow import Workflow
from flowserve.schema import Strict
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import AppQuery, QuerySpec, SegmentIds, Workload

CALLS = {"search_gen": lambda c: 3, "naive_rag": lambda c: c.top_k + 1, "advanced_rag": lambda c: c.top_k + 1}


class TeolaConfig(Strict):
    kind: Literal["search_gen", "naive_rag", "advanced_rag"]
    rate: float = Field(gt=0)
    queries: int = Field(gt=0)
    seed: int = 0
    arrival: Literal["poisson", "gamma"] = "poisson"
    cv: float | None = Field(None, gt=0)
    sd_log: float = Field(0.25, ge=0)
    question_tokens: int = Field(40, ge=1)
    answer_tokens: int = Field(120, ge=1)  # every answer: drafts, refinements, the final one
    query_tokens: int = Field(20, ge=1)  # each expanded or search query
    n_queries: int | None = Field(None, ge=1)  # default: 1 search (search_gen), 3 expanded queries (advanced)
    doc_tokens: int = Field(40_000, ge=1)
    chunk: int = Field(256, ge=2)
    overlap: int = Field(30, ge=0)
    top_k: int = Field(3, ge=1)
    per_query: int = Field(16, ge=1)
    results: int = Field(4, ge=1)  # web search results per query (Teola: top 4)
    snippet_tokens: int = Field(50, ge=1)  # a search result: title and snippet
    chunk_op_s: float = Field(0.005, ge=0)  # CPU time to chunk a document
    search_error: float = Field(0.0, ge=0, le=1)  # share of web searches that fail
    search_delay_s: float = Field(0.0, ge=0)  # extra latency of every web search
    model: str | None = "llama-2-13b"
    judge_model: str | None = "llama-2-7b"

    def build(self) -> Workload:
        rng = np.random.default_rng(self.seed)
        times = arrival_times(rng, self.queries, self.rate, self.arrival, self.cv)
        ids = SegmentIds()
        specs = [QuerySpec(i, float(t), self._plan(rng, ids)) for i, t in enumerate(times)]
        return Workload(f"teola-{self.kind}", tuple(specs))

    def _draw(self, rng: np.random.Generator, mean: int) -> int:
        if self.sd_log == 0:
            return mean
        return max(1, round(float(rng.lognormal(math.log(mean) - self.sd_log**2 / 2, self.sd_log))))

    def _plan(self, rng: np.random.Generator, ids: SegmentIds) -> AppQuery:
        question = Segment(ids.unique(), self._draw(rng, self.question_tokens))
        outputs: dict[str, int] = {}
        tools: dict[str, ToolOutcome] = {}
        marks: dict[str, tuple[int, ...]] = {}
        n = self.n_queries or (1 if self.kind == "search_gen" else 3)
        max_tokens = 4 * self.answer_tokens  # the cap asked for; the oracle knows the truth

        def queries(key: str) -> int:
            """The splittable step `key` writes n queries, one a line; returns the cap."""
            lens = [self._draw(rng, self.query_tokens) for _ in range(n)]
            outputs[key], marks[key] = sum(lens), tuple(int(x) for x in np.cumsum(lens))
            return max(lens) + 8

        def chunks(k: int) -> ToolOutcome:
            return ToolOutcome(0.0, value=tuple(Segment(ids.unique(), self.chunk) for _ in range(k)))

        make: Callable[[], Workflow]
        if self.kind == "search_gen":
            outputs["draft"] = self._draw(rng, self.answer_tokens)
            cap = queries("judge")
            for i in range(n):
                failed = rng.random() < self.search_error
                tools[f"search{i}"] = ToolOutcome(self.search_delay_s, "search service error: HTTP 503" if failed
                                                  else None, output_tokens=self.results * self.snippet_tokens)
            outputs["answer"] = self._draw(rng, self.answer_tokens)
            make = lambda: SearchGen(question, n, self.results, max_tokens, cap, max_tokens,  # noqa: E731
                                     self.model, self.judge_model)
            return self._query(make, outputs, tools, marks)
        doc = Segment(ids.unique(), self.doc_tokens)
        n_chunks = chunk_count(self.doc_tokens, self.chunk, self.overlap)
        tools["chunk"] = ToolOutcome(self.chunk_op_s)
        for j in range(self.top_k):
            outputs[f"draft{j}" if self.kind == "naive_rag" else f"refine{j}"] = self._draw(rng, self.answer_tokens)
        if self.kind == "naive_rag":
            tools["search"] = chunks(self.top_k)
            outputs["answer"] = self._draw(rng, self.answer_tokens)
            make = lambda: NaiveRAG(question, doc, n_chunks, self.top_k, self.chunk, self.overlap,  # noqa: E731
                                    max_tokens, self.model)
            return self._query(make, outputs, tools, marks)
        cap = queries("expand")
        tools["rerank"] = chunks(self.top_k)
        make = lambda: AdvancedRAG(question, doc, n_chunks, n, self.per_query, self.top_k,  # noqa: E731
                                   self.chunk, self.overlap, max_tokens, cap, self.model)
        return self._query(make, outputs, tools, marks)

    def _query(self, make: Callable[[], Workflow], outputs: dict[str, int], tools: dict[str, ToolOutcome],
               marks: dict[str, tuple[int, ...]]) -> AppQuery:
        """The app's query for the simulator; its standalone latency is measured alone."""
        return AppQuery(self.kind, make, TableOracle(outputs, tools, marks), expected_calls=CALLS[self.kind](self))
