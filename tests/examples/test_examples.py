"""Every file in examples/ does what its header says: the command written there runs from
the repository root (simulations and SQL shrunk to a few queries), the serving configs
serve (simulated engines and llama-server with SmolLM2-135M-Instruct) or validate (vLLM and
SGLang by URL, which this machine cannot run)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KEY = {"authorization": "Bearer sk-local-1"}
runner = CliRunner()


def commands(path: Path) -> list[str]:
    """The `flowserve ...` command lines in the file's comments."""
    lines = (re.sub(r"^\s*(#|/\*|--)?\s*", "", line).removesuffix("*/").strip()
             for line in path.read_text().splitlines())
    return [line for line in lines if line.startswith("flowserve ")]


def invoke(args: list[str]) -> str:
    r = runner.invoke(app, args, terminal_width=200)
    assert r.exit_code == 0, (args, r.output)
    return r.output


def files(folder: str, ext: str) -> list[Path]:
    return sorted((EXAMPLES / folder).glob(f"*.{ext}"))


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("path", files("clusters", "yaml") + files("workloads", "yaml"), ids=lambda p: p.name)
def test_cluster_and_workload_examples_run_as_written(path: Path, tmp_path: Path) -> None:
    runs = [c for c in commands(path) if c.startswith("flowserve simulate")]
    assert runs, f"{path.name}: its header shows no flowserve simulate command"
    for i, cmd in enumerate(runs):
        out = tmp_path / f"{i}.json"
        invoke([*shlex.split(cmd)[1:], "--set", "workload.queries=6", "--slo-scales", "4", "--json", str(out)])
        summary = json.loads(out.read_text())
        assert summary["queries"] == summary["completed"] == 6, cmd


@pytest.mark.parametrize("path", files("sql", "sql"), ids=lambda p: p.name)
def test_sql_examples_run_as_written(path: Path, tmp_path: Path) -> None:
    (cmd,) = commands(path)
    rel = path.relative_to(ROOT)
    assert f'"$(cat {rel})"' in cmd
    args = [path.read_text() if a == f"$(cat {rel})" else a for a in shlex.split(cmd)[1:]]
    invoke([*args, "--json", str(tmp_path / "out.json")])
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["rows"] and result["report"]["calls"] > 100 and not result["report"]["errors"]


def serving_files() -> list[Path]:
    return sorted(EXAMPLES.glob("serve-*.yaml"))


@pytest.mark.parametrize("path", serving_files(), ids=lambda p: p.name)
def test_serving_examples_validate_and_say_how_to_serve_them(path: Path) -> None:
    cfg = load_serve_config(path.relative_to(ROOT))
    assert cfg.api_keys == ("sk-local-1",)
    assert f"flowserve serve --config {path.relative_to(ROOT)} --port 8000" in commands(path)
    create_app(cfg)  # the gateway builds: policies, workflows and databases prepared


def test_serve_sim_answers_completions_and_chat() -> None:
    cfg = load_serve_config("examples/serve-sim.yaml")
    with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url, headers=KEY, timeout=60) as http:
        r = http.post("/v1/completions", json={"model": "llama-3.1-8b", "prompt": "Say hello", "max_tokens": 8},
                      headers={"x-tenant": "gold"})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 8
        r = http.post("/v1/chat/completions", json={"model": "llama-3.1-8b", "max_tokens": 5,
                                                    "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"]
        assert http.post("/v1/completions", json={"model": "llama-3.1-8b", "prompt": "x"},
                         headers={"authorization": "Bearer wrong"}).status_code == 401


@pytest.mark.real_engine
def test_serve_llama_serves_the_real_model(smollm2_server: LlamaServer, tmp_path: Path) -> None:
    """The file as written, with its engine URL pointed at the test's llama-server running
    SmolLM2-135M-Instruct, as its header starts it."""
    data = yaml.safe_load((EXAMPLES / "serve-llama.yaml").read_text())
    assert data["instances"][0]["url"] == "http://127.0.0.1:8081"
    assert "--alias smollm2" in (EXAMPLES / "serve-llama.yaml").read_text()
    data["instances"][0]["url"] = smollm2_server.base_url
    data["instances"][0]["profile"] = str(EXAMPLES / data["instances"][0]["profile"])
    path = tmp_path / "serve-llama.yaml"
    path.write_text(yaml.safe_dump(data))
    with BackgroundServer(create_app(load_serve_config(path))) as srv, \
            httpx.Client(base_url=srv.url, headers=KEY, timeout=300) as http:
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["smollm2"]
        chat = [{"role": "user", "content": "Name three primary colors."}]
        r = http.post("/v1/chat/completions", json={"model": "smollm2", "max_tokens": 8, "temperature": 0,
                                                    "messages": chat})
        assert r.status_code == 200, r.text
        assert r.headers["x-flowserve-instance"] == "llama"
        assert "red" in r.json()["choices"][0]["message"]["content"].lower()
