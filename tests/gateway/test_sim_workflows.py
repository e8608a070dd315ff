"""`flowserve serve` on simulated engines runs every built-in workflow (issue 27, item 7):
simulated LLMs answer one line of placeholder text, so each expansion and each judge
writes fewer queries than planned and a short document has fewer chunks than top-k —
the fan-out shrinks and the query completes; it never fails with a 502."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fixtures_retrieval import SEARCH_KEY
from live_support import MODEL

from flowserve.apps.registry import builtin_workflows
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config
from flowserve.retrieval.process import SearchServiceProcess

KEY = "sk-sim-workflows"
SHORT_DOC = "Etna is an active volcano on the east coast of Sicily. It erupts often."
INPUTS = {
    "search_gen": {"question": "Which volcano is in Sicily?"},
    "naive_rag": {"question": "Which volcano is in Sicily?", "document": SHORT_DOC},
    "advanced_rag": {"question": "Which volcano is in Sicily?", "document": SHORT_DOC},
    "text2sql": {"question": "How many loans are there?", "candidates": 1, "max_rounds": 1},
}


@pytest.fixture(scope="module", params=["none", "all"])
def http(search_service: SearchServiceProcess, request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    cfg = serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2},
                      *({"name": k, "kind": k} for k in ("embedding", "vector_db", "reranker")),
                      {"name": "search", "kind": "search", "url": search_service.url}],
        "api_keys": [KEY],
        "gateway": {"time_scale": 200.0, "passes": request.param, "queue": "topology",
                    "retrieval": {"search_key": SEARCH_KEY}},
    }, "test")
    with BackgroundServer(create_app(cfg)) as srv, \
            httpx.Client(base_url=srv.url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


def test_every_builtin_workflow_has_an_input_here() -> None:
    assert set(INPUTS) == set(builtin_workflows())


@pytest.mark.parametrize("name", ["search_gen", "naive_rag", "advanced_rag"])
def test_rag_workflows_complete_on_simulated_engines(http: httpx.Client, name: str) -> None:
    r = http.post(f"/v1/workflows/{name}", json={"input": INPUTS[name]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "completed" and isinstance(body["output"]["answer"], str)
    nodes = {c["node"] for c in body["calls"] if not c["node"].endswith(".prefill")}
    # one line of placeholder text: one query searched; one chunk: one draft or refine
    assert nodes == {"search_gen": {"draft", "judge", "answer"}, "naive_rag": {"draft0", "answer"},
                     "advanced_rag": {"expand", "refine0"}}[name]


def test_text2sql_runs_on_simulated_engines_and_ends_with_the_agents_reason(http: httpx.Client) -> None:
    # placeholder text names no table: the agent itself declares the question unanswerable
    r = http.post("/v1/workflows/text2sql", json={"input": INPUTS["text2sql"]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unanswerable"
