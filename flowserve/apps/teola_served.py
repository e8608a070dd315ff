"""Teola's three apps as served workflows (`POST /v1/workflows/{name}`):

    search_gen    {"question": "..."}
    naive_rag     {"question": "...", "document": "..."}
    advanced_rag  {"question": "...", "document": "..."}

Settings (`gateway.workflows.<name>`) fix the app's shape (chunk 256 / overlap 30 /
top-3, 3 expanded queries of 16 chunks each, ...); `index_dim` sets the vector index's
dimension (a dimension other than the embedder's fails the query with that reason);
`judge_model` names the model of search_gen's draft and judge (default: the request's
model). The retrieval ops run on the gateway's real components (`flowserve.retrieval`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from flowserve.apps.base import WorkflowDef
from flowserve.apps.teola import AdvancedRAG, NaiveRAG, SearchGen
from flowserve.errors import ConfigError, RequestError
from flowserve.retrieval.embedding import chunk_tokens, load_tokenizer

MAX_DOCUMENT_CHARS = 2_000_000

DEFAULTS: dict[str, dict[str, int | str | None]] = {
    "search_gen": {"n_queries": 1, "results": 4, "max_tokens": 256, "query_tokens": 64, "draft_tokens": 256,
                   "judge_model": None},
    "naive_rag": {"top_k": 3, "chunk": 256, "overlap": 30, "max_tokens": 256, "index_dim": None},
    "advanced_rag": {"n_queries": 3, "per_query": 16, "top_k": 3, "chunk": 256, "overlap": 30, "max_tokens": 256,
                     "query_tokens": 64, "index_dim": None},
}


def _prepare(name: str) -> Any:
    def prepare(settings: Mapping[str, Any]) -> dict[str, Any]:
        known = DEFAULTS[name]
        extra = sorted(set(settings) - set(known))
        if extra:
            raise ConfigError(f"gateway.workflows.{name}: unknown field(s) {extra}; known: {sorted(known)}")
        out: dict[str, Any] = dict(known)
        for k, v in settings.items():
            if v is None and k in ("index_dim", "judge_model"):
                continue
            if k == "judge_model":
                if not isinstance(v, str) or not v:
                    raise ConfigError(f"gateway.workflows.{name}.{k}: expected a model name, got {v!r}")
                out[k] = v
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if k == "overlap" else 1):
                raise ConfigError(f"gateway.workflows.{name}.{k}: expected a positive integer, got {v!r}")
            out[k] = v
        if "chunk" in out and not out["overlap"] < out["chunk"]:
            raise ConfigError(f"gateway.workflows.{name}: overlap must be smaller than chunk")
        if name != "search_gen":
            out["_tokenizer"] = functools.cache(load_tokenizer)  # loaded by the first request
        return out
    return prepare


def _text(inputs: Mapping[str, Any], key: str, name: str, limit: int) -> str:
    v = inputs.get(key)
    if not isinstance(v, str) or not v.strip():
        raise RequestError(f"{name}: input {key!r} (a non-empty string) is required")
    if len(v) > limit:
        raise RequestError(f"{name}: input {key!r} is longer than {limit} characters")
    return v.strip()


def _rag_args(name: str, inputs: Mapping[str, Any], s: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(inputs) - {"question", "document"})
    if unknown:
        raise RequestError(f"{name}: unknown input(s) {unknown}; known: ['document', 'question']")
    doc = _text(inputs, "document", name, MAX_DOCUMENT_CHARS)
    n = len(chunk_tokens(doc, s["_tokenizer"](), s["chunk"], s["overlap"]))
    return {"question": _text(inputs, "question", name, 20_000), "document": doc, "n_chunks": max(n, 1),
            **{k: s[k] for k in DEFAULTS[name]}}


def build_search_gen(inputs: Mapping[str, Any], s: Mapping[str, Any], model: str | None) -> SearchGen:
    unknown = sorted(set(inputs) - {"question"})
    if unknown:
        raise RequestError(f"search_gen: unknown input(s) {unknown}; known: ['question']")
    return SearchGen(_text(inputs, "question", "search_gen", 20_000), s["n_queries"], s["results"],
                     s["max_tokens"], s["query_tokens"], s["draft_tokens"], model, s["judge_model"] or model)


def build_naive_rag(inputs: Mapping[str, Any], s: Mapping[str, Any], model: str | None) -> NaiveRAG:
    return NaiveRAG(**_rag_args("naive_rag", inputs, s), model=model)


def build_advanced_rag(inputs: Mapping[str, Any], s: Mapping[str, Any], model: str | None) -> AdvancedRAG:
    return AdvancedRAG(**_rag_args("advanced_rag", inputs, s), model=model)


SEARCH_GEN = WorkflowDef("search_gen", "Teola search-engine-augmented generation: a draft answer, a judge that "
                         "writes the web searches needed, the answer from their results", build_search_gen,
                         _prepare("search_gen"))
NAIVE_RAG = WorkflowDef("naive_rag", "Teola document QA, naive RAG: chunk 256/30, embed, index, top-3, answer",
                        build_naive_rag, _prepare("naive_rag"))
ADVANCED_RAG = WorkflowDef("advanced_rag", "Teola advanced RAG: index, 3 expanded queries × 16 chunks, rerank to "
                           "top-3, refine-mode synthesis", build_advanced_rag, _prepare("advanced_rag"))
