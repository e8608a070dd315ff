"""examples/agents: the plain-openai agent (simulated engines) and the LangGraph tool agent
(an engine that calls tools) each run against `flowserve serve` in its own process with
`--record`: every call lands in one program, the summary adds up, and the recorded trace
replays in the simulator."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from tool_engine import ToolEngine

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import load_workload
from flowserve.workloads.agent_trace import read_agent_trace

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-local-1"
MODEL = "llama-3.1-8b"
SIM = [InstanceSpec("a", "A100-80G", MODEL, 1, reports_capacity=True)]


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "agents" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def serve(tmp: Path, config: dict) -> Iterator[str]:
    cfg = tmp / "serve.yaml"
    cfg.write_text(yaml.safe_dump({**config, "api_keys": [KEY]}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with served([sys.executable, "-c", "from flowserve.cli import app; app()", "serve", "--config", str(cfg),
                 "--port", str(port), "--log-level", "warning", "--record", str(tmp / "recorded")],
                f"{url}/health", tmp / "serve.log"):
        yield url


def recorded(tmp: Path) -> Path:
    [path] = (tmp / "recorded").glob("trace-*.jsonl")
    return path


@pytest.fixture
def sim_gateway(tmp_path: Path) -> Iterator[str]:
    yield from serve(tmp_path, {"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "backend": "sim",
                                               "count": 2}],
                                "gateway": {"dispatch": "flowserve", "queue": "flowserve", "time_scale": 100}})


def test_the_openai_agent_is_one_program_whose_trace_replays(sim_gateway: str, tmp_path: Path) -> None:
    from flowserve.client import program

    agent = example("openai_agent")
    run = program(sim_gateway, api_key=KEY, slo_ms=60_000)
    with run as client:
        result = agent.run_agent(client, MODEL, "Why do prefix caches help agents?", rounds=2)
    s = run.summary
    assert result["calls"] == 1 + 3 + 2 + 1 == s["calls"] and s["failed_calls"] == 0  # every call, one program
    assert s["prompt_tokens"] == result["prompt_tokens"] and s["output_tokens"] == result["output_tokens"]
    assert s["threads"] == ["aspect-0", "aspect-1", "aspect-2", "main"] and s["deadline_met"] is True
    [q] = read_agent_trace(str(recorded(tmp_path))).traced
    assert [c.step for c in q.calls].count("research") == 3 and len(q.calls) == s["calls"]
    assert sum(c.output_length for c in q.calls) == s["output_tokens"]
    res = simulate(SIM, load_workload(str(recorded(tmp_path))), PolicySpec("flowserve", "flowserve"))
    assert len(res.calls) == s["calls"] and all(out.failed is None for out in res.queries)


@pytest.fixture
def tool_gateway(tmp_path: Path) -> Iterator[tuple[str, ToolEngine]]:
    with ToolEngine() as engine:
        for url in serve(tmp_path, {"instances": [{"name": "e", "gpu": "A100-80G", "model": engine.model,
                                                   "backend": "openai", "url": engine.url}],
                                    "gateway": {"engine_kinds": {"e": "vllm"}}}):
            yield url, engine


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_langgraph_agent_runs_its_tool_loop_as_one_program(tool_gateway: tuple[str, ToolEngine],
                                                               tmp_path: Path) -> None:
    url, engine = tool_gateway
    out = example("langgraph_agent").run(url, engine.model, "What is the weather in Paris?", api_key=KEY)
    assert out["messages"] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert out["answer"] == "it is sunny, 21 °C"  # the engine's tool call ran the agent's tool
    s = out["program"]
    assert s["calls"] == out["model_calls"] == 2 and s["failed_calls"] == 0
    assert s["prompt_tokens"] == out["prompt_tokens"] and s["output_tokens"] == out["output_tokens"]
    sent = engine.bodies("/v1/chat/completions")
    assert [m["role"] for m in sent[-1]["messages"]] == ["user", "assistant", "tool"]
    [q] = read_agent_trace(str(recorded(tmp_path))).traced
    assert len(q.calls) == 2 and q.calls[1].after == (0,) and q.calls[1].gap_s > 0  # the tool ran in between
    res = simulate(SIM, load_workload(str(recorded(tmp_path))), PolicySpec("flowserve", "flowserve"))
    assert len(res.calls) == 2 and all(out.failed is None for out in res.queries)
