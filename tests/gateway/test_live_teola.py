"""naive_rag end to end: HTTP → the gateway → llama-server (the project's tiny model, on
127.0.0.1) for the LLM, WordLlama + usearch for embedding and vector search."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from fixtures_retrieval import SEARCH_KEY, TOPICS
from live_support import tiny_profile

from flowserve.bench.teola_live import TeolaLiveSetup, run_apps
from flowserve.calibrate.validate import engine_instance
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config
from flowserve.retrieval.process import SearchServiceProcess

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

KEY = "sk-teola"


def test_naive_rag_through_the_gateway_on_llama_server(llama_server: LlamaServer, tiny_model: TinyModel,
                                                       tmp_path: Path) -> None:
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 2)
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": "llama", "profile": str(profile), "backend": "openai", "url": llama_server.base_url},
                      {"name": "emb", "kind": "embedding"}, {"name": "vec", "kind": "vector_db"}],
        "api_keys": [KEY],
        "gateway": {"passes": "all", "queue": "topology",
                    "workflows": {"naive_rag": {"chunk": 24, "overlap": 4, "top_k": 2, "max_tokens": 8}}},
    }))
    doc = "\n\n".join(TOPICS.values())
    with BackgroundServer(create_app(load_serve_config(path))) as srv, \
            httpx.Client(base_url=srv.url, timeout=120, headers={"Authorization": f"Bearer {KEY}"}) as http:
        assert "naive_rag" in {w["name"] for w in http.get("/v1/workflows").json()["data"]}
        r = http.post("/v1/workflows/naive_rag", json={"input": {"question": "Which volcano is in Sicily?",
                                                                 "document": doc}})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "completed" and isinstance(body["output"]["answer"], str)
        calls = {c["node"]: c for c in body["calls"]}
        assert set(calls) == {"draft0", "draft1", "answer", "draft0.prefill", "answer.prefill"}
        assert calls["answer.prefill"]["output_tokens"] <= 1 and calls["draft0.prefill"]["output_tokens"] <= 1
        assert all(0 < calls[k]["output_tokens"] <= 8 for k in ("draft0", "draft1", "answer"))
        # a draft's prompt holds the instruction, the question and a retrieved chunk of ≤ 24 tokens
        assert calls["draft0"]["prompt_tokens"] > calls["draft0.prefill"]["prompt_tokens"] + 5
        bad = http.post("/v1/workflows/naive_rag", json={"input": {"question": "Which volcano?"}})
        assert bad.status_code == 400 and "input 'document'" in bad.json()["error"]["message"]


def test_bench_teola_live_runs_every_arm_on_llama_server(llama_server: LlamaServer, tiny_model: TinyModel,
                                                          search_service: SearchServiceProcess,
                                                          tmp_path: Path) -> None:
    """`flowserve bench teola --live`'s plumbing, one query per arm: every query completes,
    and every arm decodes the pinned lengths (the e-graph adds ≤ 1 token per split prefill)."""
    profile = tiny_profile(tmp_path / "p.yaml", tiny_model, 2)
    setup = TeolaLiveSetup((engine_instance(llama_server.base_url, profile, "llama0"),), search_service.url, SEARCH_KEY)
    lines: list[str] = []
    report = run_apps(setup, ["search_gen", "naive_rag"], 1, 1.0, 0, lines.append)
    pinned = {"search_gen": 16 + 8 + 16, "naive_rag": 3 * 16 + 16}  # draft + judge + answer; three drafts + answer
    for app, want in pinned.items():
        runs = report[app]["runs"]
        assert set(runs) == {"paper baseline", "strong chain", "e-graph", "e-graph alone"}
        assert all(r["completed"] == 1 for r in runs.values()), {k: r["errors"] for k, r in runs.items()}
        assert runs["paper baseline"]["output_tokens_per_query"] == runs["strong chain"]["output_tokens_per_query"] \
            == want
        for arm in ("e-graph", "e-graph alone"):
            assert want < runs[arm]["output_tokens_per_query"] <= want + 3
        assert report[app]["ratios"]["vs_paper"] > 0
    assert any("naive_rag live: e-graph" in line and "the paper baseline" in line for line in lines)
