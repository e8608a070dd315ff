"""Teola's three applications (Teola §7), each written once as a `Workflow`.

* `SearchGen` — search-engine-augmented generation (Teola Fig. 2(a), after SlimPLM): a
  smaller LLM (the *judge model*, Llama-2-7B in the paper) writes a heuristic draft
  answer, then judges from it whether a web search is needed and, if so, writes the
  search queries (one a line: a splittable output; none when no search is needed); each
  query goes to the search engine (top 4 results); the core LLM answers from the results;
* `NaiveRAG` — document QA: chunk the document (256 tokens, overlap 30), embed and
  ingest the chunks, embed the question, search the top 3, synthesise tree-summarize
  style (Teola §7.1: "three initial requests, then a request that builds the answer"):
  a draft answer per chunk, then one answer combining the drafts;
* `AdvancedRAG` — the same indexing, then query expansion by the core LLM into 3
  queries, 16 chunks each, rerank to the top 3, refine-mode synthesis (answer from the
  first chunk, then refine the answer with each next one).

Steps are grouped into *modules* the way a framework (LlamaIndex; Teola's LlamaDist
baseline) runs them: each module follows the whole previous module (`chain=` edges) —
indexing (chunk → embed every chunk → ingest) completes before the query side starts,
the draft and the judgement complete before any search, each expanded query's
retrieval (embed + search, or one web search) is a module after the previous one's,
rerank waits for every search and refine-mode synthesis for the whole rerank. With no
passes that is the module-chain baseline; the `prune` pass keeps only the data edges.

A splittable output may hold fewer parts than planned (two queries where three were
asked, fewer hits than top-k): the steps that need a missing part do not run, and the
joins (rerank, the answers) read the parts that exist (`Step.optional`). Texts are `str`
live; in the simulator the question and document are `Segment`s and the oracle models
every output. A failed step (a search service down or slow) fails the query with its
reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import NodeResult
from flowserve.graph.primitives import CHUNK, PART, part_key
from flowserve.graph.prompt import Segment
from flowserve.graph.workflow import Graph, Step, Workflow

Text = str | Segment

EXPAND = ("You are a search assistant. Rewrite the user's question into {n} different search queries "
          "that together cover what is needed to answer it. Write exactly one query per line, "
          "with no numbering and no other text.\nQuestion: ")
DRAFT = ("You are a helpful assistant. Answer the question briefly from what you already know, "
         "without looking anything up.\nQuestion: ")
JUDGE = ("You decide whether a web search is needed to answer the question correctly, given a draft "
         "answer written without searching. If the draft is certainly right, write nothing. Otherwise "
         "write up to {n} web search queries that would find the missing facts, one per line, with no "
         "numbering and no other text.\nQuestion: ")
ANSWER = ("You are a helpful assistant. Answer the question using only the context below. "
          "Cite the passages you use; say so when the context does not contain the answer.\nQuestion: ")
SUMMARIZE = ("You are a helpful assistant. Combine the candidate answers below, each written from one "
             "retrieved passage, into one answer to the question.\nQuestion: ")
REFINE = ("You are refining an existing answer. Using the new context below, improve the existing "
          "answer to the question if the context is useful, otherwise repeat it unchanged.\nQuestion: ")


class _Modules:
    """Chains each module after every step of the previous one (the module-chain order)."""

    def __init__(self) -> None:
        self.prev: list[Step] = []
        self.cur: list[Step] = []

    def next(self) -> None:
        if self.cur:
            self.prev, self.cur = self.cur, []

    def add(self, step: Step) -> Step:
        self.cur.append(step)
        return step


class _App(Workflow):
    answer_keys: tuple[str, ...] = ("answer",)  # the last of these that ran holds the answer
    # extra sampling parameters of every LLM step (the live benchmark pins output lengths
    # with `ignore_eos`, so both arms of a comparison decode the same number of tokens)
    llm_params: Mapping[str, Any] = {}

    def sampling(self, params: Mapping[str, Any]) -> _App:
        """Every LLM step samples with these extra parameters (returns the app)."""
        self.llm_params = params
        return self

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        if result.error is not None:
            raise WorkflowError(f"{self.name}: step {key!r} failed: {result.error}")

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        ran = [r for r in (results.get(k) for k in self.answer_keys) if r is not None and not r.missing]
        r = ran[-1] if ran else None
        return {"answer": None if r is None else r.text, "output_tokens": 0 if r is None else r.output_tokens}


def _parts(g: Graph, m: _Modules, source: Step, n: int, stage: str, first: Text | None = None) -> list[Step]:
    """Part i of `source`'s output, for i < n; `first`: part 0 when the output has none."""
    return [m.add(g.tool(part_key(source.key, i), PART, stage=stage, chain=m.prev, source=source, index=i, of=n,
                         **({"default": first} if i == 0 and first is not None else {})))
            for i in range(n)]


def _index(g: Graph, m: _Modules, document: Text, n_chunks: int, size: int, overlap: int,
           dim: int | None) -> Step:
    """Indexing module: chunk, embed the chunks, ingest them (the vector index; `dim`:
    the index's dimension, default the embeddings')."""
    chunks = m.add(g.tool("chunk", CHUNK, document=document, size=size, overlap=overlap))
    emb = m.add(g.tool("embed_docs", "embed", batchable=True, texts=chunks, units=n_chunks))
    extra = {} if dim is None else {"dim": dim}
    return m.add(g.tool("ingest", "vector_ingest", batchable=True, vectors=emb, units=n_chunks, **extra))


class SearchGen(_App):
    name = "search_gen"

    def __init__(self, question: Text, n_queries: int = 1, results: int = 4, max_tokens: int = 256,
                 query_tokens: int = 64, draft_tokens: int = 256, model: str | None = None,
                 judge_model: str | None = None) -> None:
        self.question, self.n, self.results = question, n_queries, results
        self.max_tokens, self.query_tokens, self.draft_tokens = max_tokens, query_tokens, draft_tokens
        self.model, self.judge_model = model, judge_model

    def start(self, g: Graph) -> None:
        m, q, p = _Modules(), self.question, self.llm_params
        draft = m.add(g.llm("draft", [DRAFT, q, "\nAnswer:"], max_tokens=self.draft_tokens, model=self.judge_model,
                            params=p))
        m.next()
        judge = m.add(g.llm("judge", [JUDGE.format(n=self.n), q, "\nDraft answer:\n", draft, "\nSearch queries:"],
                            max_tokens=self.query_tokens * self.n, splittable=True, chain=m.prev,
                            model=self.judge_model, params=p))
        m.next()
        queries = _parts(g, m, judge, self.n, "judge_part")
        m.next()
        hits = []
        for i, query in enumerate(queries):  # one search module per query, in turn
            hits.append(m.add(g.tool(f"search{i}", "web_search", batchable=True, chain=m.prev, query=query,
                                     k=self.results)))
            m.next()
        g.llm("answer", [ANSWER, q, "\nSearch results:\n", *(h.optional for h in hits), "\nAnswer:"],
              max_tokens=self.max_tokens, chain=m.prev, model=self.model, params=p)


class NaiveRAG(_App):
    name = "naive_rag"

    def __init__(self, question: Text, document: Text, n_chunks: int, top_k: int = 3, chunk: int = 256,
                 overlap: int = 30, max_tokens: int = 256, model: str | None = None,
                 index_dim: int | None = None) -> None:
        self.question, self.document, self.n_chunks = question, document, n_chunks
        self.top_k, self.chunk, self.overlap, self.max_tokens, self.model = top_k, chunk, overlap, max_tokens, model
        self.index_dim = index_dim

    def start(self, g: Graph) -> None:
        m, p = _Modules(), self.llm_params
        index = _index(g, m, self.document, self.n_chunks, self.chunk, self.overlap, self.index_dim)
        m.next()
        qv = m.add(g.tool("embed_query", "embed", batchable=True, chain=m.prev, texts=[self.question]))
        m.next()
        hits = m.add(g.tool("search", "vector_search", batchable=True, chain=m.prev, vector=qv, index=index,
                            k=self.top_k))
        m.next()
        best = _parts(g, m, hits, self.top_k, "search_part")
        m.next()
        drafts = []
        for j, ctx in enumerate(best):  # tree-summarize: one answer per chunk, in turn (LlamaIndex sync)
            drafts.append(m.add(g.llm(f"draft{j}", [ANSWER, self.question, "\nContext:\n", ctx, "\nAnswer:"],
                                      max_tokens=self.max_tokens, chain=m.prev, model=self.model, params=p)))
            m.next()
        sources = [x for j, d in enumerate(drafts) for x in (f"\nCandidate answer {j + 1}:\n", d.optional)]
        g.llm("answer", [SUMMARIZE, self.question, *sources, "\nAnswer:"], max_tokens=self.max_tokens,
              chain=m.prev, model=self.model, params=p)


class AdvancedRAG(_App):
    name = "advanced_rag"

    def __init__(self, question: Text, document: Text, n_chunks: int, n_queries: int = 3, per_query: int = 16,
                 top_k: int = 3, chunk: int = 256, overlap: int = 30, max_tokens: int = 256,
                 query_tokens: int = 64, model: str | None = None, index_dim: int | None = None) -> None:
        self.question, self.document, self.n_chunks, self.index_dim = question, document, n_chunks, index_dim
        self.n, self.per_query, self.top_k, self.chunk, self.overlap = n_queries, per_query, top_k, chunk, overlap
        self.max_tokens, self.query_tokens, self.model = max_tokens, query_tokens, model
        self.answer_keys = tuple(f"refine{j}" for j in range(top_k))

    def start(self, g: Graph) -> None:
        m, p = _Modules(), self.llm_params
        index = _index(g, m, self.document, self.n_chunks, self.chunk, self.overlap, self.index_dim)
        m.next()
        expand = m.add(g.llm("expand", [EXPAND.format(n=self.n), self.question], max_tokens=self.query_tokens * self.n,
                             splittable=True, chain=m.prev, model=self.model, params=p))
        m.next()
        # an expansion that wrote no query at all retrieves with the question itself
        queries = _parts(g, m, expand, self.n, "expand_part", first=self.question)
        m.next()
        hits = []
        for i, q in enumerate(queries):  # one retrieval module (embed, search) per expanded query, in turn
            v = m.add(g.tool(f"embed_q{i}", "embed", batchable=True, chain=m.prev, texts=q))
            hits.append(m.add(g.tool(f"search{i}", "vector_search", batchable=True, chain=m.prev, vector=v,
                                     index=index, k=self.per_query)))
            m.next()
        ranked = m.add(g.tool("rerank", "rerank", batchable=True, chain=m.prev, query=self.question,
                              units=self.n * self.per_query, top=self.top_k,
                              **{f"docs{i}": h.optional for i, h in enumerate(hits)}))
        m.next()
        best = _parts(g, m, ranked, self.top_k, "rerank_part")
        m.next()
        prev: Step | None = None
        for j, ctx in enumerate(best):
            if prev is None:
                prompt: Sequence[Any] = [ANSWER, self.question, "\nContext:\n", ctx, "\nAnswer:"]
            else:
                prompt = [REFINE, self.question, "\nNew context:\n", ctx, "\nExisting answer:\n", prev,
                          "\nRefined answer:"]
            prev = m.add(g.llm(f"refine{j}", prompt, max_tokens=self.max_tokens, chain=m.prev, model=self.model,
                               params=p))
            m.next()


APPS: dict[str, type[_App]] = {cls.name: cls for cls in (SearchGen, NaiveRAG, AdvancedRAG)}
