"""`kind: search_gen | naive_rag | advanced_rag` — Teola's apps as simulated workloads.

  {kind: advanced_rag, rate: 2, queries: 200, seed: 0, arrival: poisson,
   doc_tokens: 40000, question_tokens: 40, answer_tokens: 120, query_tokens: 20}

Each query runs the app's `Workflow` (`flowserve.apps.teola`) on a modelled question and
document (segments); the oracle draws the LLM outputs (log-normal around the means),
where each expanded query ends (decode pipelining releases it there), and what every
retrieval returns (chunks of `chunk` tokens, search snippets). `search_error` /
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
from flowserve.graph.plan import CallStep, OpStep, Segment
from flowserve.graph.primitives import chunk_count, part_key
from flowserve.graph.workflow import Workflow
from flowserve.schema import Strict
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import AppQuery, QuerySpec, SegmentIds, Workload

SYSTEM_TOKENS = 60  # the app's instruction (its Lit text), for standalone estimates


class TeolaConfig(Strict):
    kind: Literal["search_gen", "naive_rag", "advanced_rag"]
    rate: float = Field(gt=0)
    queries: int = Field(gt=0)
    seed: int = 0
    arrival: Literal["poisson", "gamma"] = "poisson"
    cv: float | None = Field(None, gt=0)
    sd_log: float = Field(0.25, ge=0)
    question_tokens: int = Field(40, ge=1)
    answer_tokens: int = Field(120, ge=1)
    query_tokens: int = Field(20, ge=1)  # each expanded query
    n_queries: int = Field(3, ge=1)
    doc_tokens: int = Field(40_000, ge=1)
    chunk: int = Field(256, ge=2)
    overlap: int = Field(30, ge=0)
    top_k: int = Field(3, ge=1)
    per_query: int = Field(16, ge=1)
    results: int = Field(3, ge=1)  # web search results per query
    snippet_tokens: int = Field(150, ge=1)
    chunk_op_s: float = Field(0.005, ge=0)  # CPU time to chunk a document
    search_error: float = Field(0.0, ge=0, le=1)  # share of web searches that fail
    search_delay_s: float = Field(0.0, ge=0)  # extra latency of every web search
    model: str | None = None

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
        q_len = self._draw(rng, self.question_tokens)
        question = Segment(ids.unique(), q_len)
        outputs: dict[str, int] = {}
        tools: dict[str, ToolOutcome] = {}
        parts: dict[str, tuple[int, ...]] = {}
        critical: list[CallStep | OpStep] = []
        chunk = self.chunk * 1  # tokens of one retrieved chunk
        n = self.n_queries
        if self.kind != "naive_rag":
            lens = [self._draw(rng, self.query_tokens) for _ in range(n)]
            outputs["expand"] = sum(lens)
            parts["expand"] = tuple(int(x) for x in np.cumsum(lens))
            for i, ln in enumerate(lens):
                tools[part_key("expand", i)] = ToolOutcome(0.0, output_tokens=ln)
            critical.append(CallStep("expand", (Segment(ids.unique(), SYSTEM_TOKENS + q_len),), sum(lens)))
        if self.kind == "search_gen":
            for i in range(n):
                failed = rng.random() < self.search_error
                tools[f"search{i}"] = ToolOutcome(self.search_delay_s, "search service error: HTTP 503" if failed
                                                  else None, output_tokens=self.results * self.snippet_tokens)
            critical.append(OpStep("search", "web_search", 0.35 + self.search_delay_s))
            ctx = n * self.results * self.snippet_tokens
            outputs["answer"] = self._draw(rng, self.answer_tokens)
            critical.append(CallStep("answer", (Segment(ids.unique(), SYSTEM_TOKENS + q_len + ctx),),
                                     outputs["answer"]))
            plan_args = dict(n_queries=n, results=self.results, query_tokens=max(parts["expand"]) + 8)
            return app_query(self.kind, lambda: SearchGen(question, max_tokens=4 * self.answer_tokens,
                                                        model=self.model, **plan_args),
                           TableOracle(outputs, tools, parts), tuple(critical))
        doc = Segment(ids.unique(), self.doc_tokens)
        n_chunks = chunk_count(self.doc_tokens, self.chunk, self.overlap)
        tools["chunk"] = ToolOutcome(self.chunk_op_s)
        critical.insert(0, OpStep("index", "embed", 0.05 + n_chunks * 0.001))
        if self.kind == "naive_rag":
            tools["search"] = ToolOutcome(0.0, output_tokens=self.top_k * chunk)
            for j in range(self.top_k):
                tools[part_key("search", j)] = ToolOutcome(0.0, output_tokens=chunk)
                outputs[f"draft{j}"] = out = self._draw(rng, self.answer_tokens)
                critical.append(CallStep(f"draft{j}", (Segment(ids.unique(), SYSTEM_TOKENS + q_len + chunk),), out))
            outputs["answer"] = self._draw(rng, self.answer_tokens)
            drafts = sum(outputs[f"draft{j}"] for j in range(self.top_k))
            critical.append(CallStep("answer", (Segment(ids.unique(), SYSTEM_TOKENS + q_len + drafts),),
                                     outputs["answer"]))
            return app_query(self.kind, lambda: NaiveRAG(question, doc, n_chunks, self.top_k, self.chunk, self.overlap,
                                                       4 * self.answer_tokens, self.model),
                           TableOracle(outputs, tools, parts), tuple(critical))
        for j in range(self.top_k):
            tools[part_key("rerank", j)] = ToolOutcome(0.0, output_tokens=chunk)
            outputs[f"refine{j}"] = out = self._draw(rng, self.answer_tokens)
            extra = 0 if j == 0 else outputs[f"refine{j - 1}"]
            critical.append(CallStep(f"refine{j}", (Segment(ids.unique(), SYSTEM_TOKENS + q_len + chunk + extra),),
                                     out))
        max_q = max(parts["expand"][0], *(b - a for a, b in zip(parts["expand"], parts["expand"][1:], strict=False)))
        return app_query(self.kind, lambda: AdvancedRAG(question, doc, n_chunks, n, self.per_query, self.top_k,
                                                      self.chunk, self.overlap, 4 * self.answer_tokens,
                                                      max_q + 8, self.model),
                       TableOracle(outputs, tools, parts), tuple(critical))


def app_query(kind: str, make: Callable[[], Workflow], oracle: TableOracle,
              critical: tuple[CallStep | OpStep, ...]) -> AppQuery:
    """The app's query for the simulator; its standalone latency is measured alone."""
    return AppQuery(kind, make, oracle, expected_calls=sum(isinstance(c, CallStep) for c in critical))
