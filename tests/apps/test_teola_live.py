"""Teola's apps live: the gateway's driver runs them with a scripted LLM and the real
retrieval components (WordLlama, usearch, the BM25 search service in its own process);
the graph passes change when steps run, never what they compute; a wrong index
dimension or a search service that is down fails the query with its reason."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from fixtures_retrieval import SEARCH_KEY, TOPICS
from live_support import ScriptedBackend, ext_spec, run

from flowserve.apps.teola_served import ADVANCED_RAG, NAIVE_RAG, SEARCH_GEN
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.ops import op_profile
from flowserve.retrieval.embedding import Embedder
from flowserve.retrieval.process import SearchServiceProcess, free_port
from flowserve.tokenize.words import word_ids
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, WorkflowRef

DOCUMENT = "\n\n".join(TOPICS.values())


def contains(seq: Sequence[int], sub: Sequence[int]) -> bool:
    n = len(sub)
    return any(tuple(seq[i:i + n]) == tuple(sub) for i in range(len(seq) - n + 1))


def op_specs(search_url: str | None, embed_batch: bool = False) -> list[InstanceSpec]:
    out = []
    for kind in ("embedding", "reranker", "vector_db", "search"):
        # base 0.01 s, unit 0.045 s: micro-batches of 2 (0.009 / 0.0045)
        over = {"base_s": 0.01, "unit_s": 0.045} if kind == "embedding" and embed_batch else None
        out.append(InstanceSpec(f"{kind}-0", "", kind, kind=kind, op_profile=op_profile(kind, over),
                                url=search_url if kind == "search" else None))
    return out


def answers(call: LLMCall) -> str:
    if call.node in ("expand", "judge"):
        return "where is mount etna\nwhat makes bread rise\nhow do satellites stay in orbit"
    return f"answer from {call.node}"


async def _run(wf, inputs: dict, settings: dict, embedder: Embedder, search_url: str | None = None,
               passes: str = "none", embed_batch: bool = False):
    llm = ScriptedBackend(ext_spec("llm"), answers)
    d = compose_driver([llm.spec, *op_specs(search_url, embed_batch)],
                       GatewaySettings(passes=passes, retrieval={"search_key": SEARCH_KEY, "search_timeout_s": 2.0}),
                       backend_factory=lambda spec, _d: llm)
    d.retrieval._embedder = embedder  # the session's loaded model (else loaded on first use)
    await d.start()
    try:
        prepared = wf.prepare(settings)
        d.workflows.register(wf.name, lambda: wf.build(inputs, prepared, None))
        r = await d.run(wf.name, WorkflowRef(wf.name))
    finally:
        await d.shutdown()
    return r, llm


@pytest.mark.parametrize("passes", ["none", "all"])
def test_naive_rag_answers_from_the_retrieved_chunks(embedder: Embedder, passes: str) -> None:
    r, llm = run(_run(NAIVE_RAG, {"question": "Which volcano is in Sicily?", "document": DOCUMENT},
                      {"chunk": 24, "overlap": 4, "top_k": 2}, embedder, passes=passes, embed_batch=True))
    assert r.status == "completed", r.reason
    assert r.output["answer"] == "answer from answer"
    by = {c.node: c for c in llm.calls}
    # tree-summarize: a draft per retrieved chunk (the best one first), then the answer from the drafts
    assert contains(by["draft0"].prompt, word_ids(" Sicily"))
    assert not any(contains(by[k].prompt, word_ids(" yeast")) for k in ("draft0", "draft1"))
    assert contains(by["answer"].prompt, word_ids(" from draft0")) and contains(by["answer"].prompt,
                                                                                 word_ids(" from draft1"))
    prefills = [c for c in llm.calls if c.node.endswith(".prefill")]
    if passes == "none":
        assert not prefills
    else:  # instruction + question prefilled (1 token) while retrieval ran; the drafts share one
        assert sorted(c.node for c in prefills) == ["answer.prefill", "draft0.prefill"]
        for pre in prefills:
            full = by[pre.node.removesuffix(".prefill")]
            assert pre.max_tokens == 1 and full.prompt[:len(pre.prompt)] == pre.prompt and len(pre.prompt) >= 16


def test_advanced_rag_expands_searches_reranks_and_refines(embedder: Embedder) -> None:
    r, llm = run(_run(ADVANCED_RAG, {"question": "What makes bread dough rise?", "document": DOCUMENT},
                      {"chunk": 24, "overlap": 4, "per_query": 2, "top_k": 2}, embedder, passes="all"))
    assert r.status == "completed", r.reason
    assert [c.node for c in llm.calls if ".prefill" not in c.node] == ["expand", "refine0", "refine1"]
    staged, second = (next(c for c in llm.calls if c.node == k) for k in ("refine1.prefill2", "refine1"))
    # the chunk was prefilled before refine0's answer existed: refine1's prompt extends it
    assert staged.max_tokens == 1 and second.prompt[:len(staged.prompt)] == staged.prompt
    first = next(c for c in llm.calls if c.node == "refine0")
    assert contains(first.prompt, word_ids(" yeast"))  # the reranked best chunk answers the question
    second = next(c for c in llm.calls if c.node == "refine1")
    assert contains(second.prompt, word_ids(" from refine0"))  # refine mode: the answer so far
    assert r.output["answer"] == "answer from refine1"


def test_search_gen_answers_from_the_search_service(embedder: Embedder,
                                                    search_service: SearchServiceProcess) -> None:
    r, llm = run(_run(SEARCH_GEN, {"question": "Tell me about Etna, bread and satellites"},
                      {"results": 1, "n_queries": 3}, embedder, search_url=search_service.url, passes="all"))
    assert r.status == "completed", r.reason
    assert [c.node for c in llm.calls if not c.node.endswith(".prefill")] == ["draft", "judge", "answer"]
    judge, answer = (next(c for c in llm.calls if c.node == k) for k in ("judge", "answer"))
    assert contains(judge.prompt, word_ids(" from draft"))  # the judge reads the draft
    for word in (" Etna", " yeast", " geostationary"):  # one hit per query the judge wrote
        assert contains(answer.prompt, word_ids(word)), word


def test_an_index_of_the_wrong_dimension_fails_the_query_with_the_reason(embedder: Embedder) -> None:
    r, llm = run(_run(NAIVE_RAG, {"question": "Which volcano?", "document": DOCUMENT}, {"index_dim": 64},
                      embedder))
    assert r.status == "failed" and not llm.calls
    assert "step 'ingest' failed: vector index has dimension 64; cannot ingest vectors of dimension 256" in r.reason


def test_a_search_service_that_is_down_fails_the_query_with_the_reason(embedder: Embedder) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r, llm = run(_run(SEARCH_GEN, {"question": "volcanoes"}, {}, embedder, search_url=url))
    assert r.status == "failed" and [c.node for c in llm.calls] == ["draft", "judge"]
    assert re.search(rf"step 'search\d' failed: search service {re.escape(url)} is unreachable", r.reason)


def test_bad_requests_and_settings_are_refused() -> None:
    from flowserve.errors import ConfigError, RequestError

    s = NAIVE_RAG.prepare({})
    with pytest.raises(RequestError, match="input 'document'"):
        NAIVE_RAG.build({"question": "q"}, s, None)
    with pytest.raises(RequestError, match="unknown input"):
        SEARCH_GEN.build({"question": "q", "document": "d"}, SEARCH_GEN.prepare({}), None)
    with pytest.raises(ConfigError, match="unknown field"):
        ADVANCED_RAG.prepare({"topk": 3})
    with pytest.raises(ConfigError, match="overlap must be smaller"):
        NAIVE_RAG.prepare({"chunk": 8, "overlap": 8})
