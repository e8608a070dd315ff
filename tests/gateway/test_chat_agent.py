"""A LangGraph tool-using agent (`create_react_agent` over `langchain-openai`) runs its
tool loop through `flowserve serve` (the CLI, in a process of its own) to an engine that
calls tools."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from tool_engine import ToolEngine

from flowserve.engines.llamacpp_server import free_port

KEY = "sk-agent"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, ToolEngine]]:
    with ToolEngine() as engine:
        cfg = tmp_path / "serve.yaml"
        cfg.write_text(yaml.safe_dump({
            "instances": [{"name": "e", "gpu": "A100-80G", "model": engine.model, "backend": "openai",
                           "url": engine.url}],
            "api_keys": [KEY], "gateway": {"engine_kinds": {"e": "vllm"}}}))
        port = free_port()
        log = (tmp_path / "serve.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-c", "from flowserve.cli import app; app()", "serve",
                                 "--config", str(cfg), "--port", str(port), "--log-level", "warning"],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:  # a deadline-bounded wait for the process to listen, not a fixed sleep
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "flowserve serve did not come up"
                time.sleep(0.1)
            yield url, engine
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # the issue names this agent
def test_a_langgraph_react_agent_completes_a_tool_loop_through_flowserve_serve(
        gateway: tuple[str, ToolEngine]) -> None:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    url, engine = gateway
    asked: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        asked.append(city)
        return "sunny"

    model = ChatOpenAI(model=engine.model, base_url=f"{url}/v1", api_key=KEY, max_retries=0, temperature=0)
    agent = create_react_agent(model, [get_weather])
    out = agent.invoke({"messages": [("user", "What is the weather in Paris?")]})
    kinds = [type(m).__name__ for m in out["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert asked == ["Paris"]  # the engine's tool call, relayed, ran the agent's tool
    assert out["messages"][-1].content == "it is sunny"
    sent = engine.bodies("/v1/chat/completions")
    assert [m["role"] for m in sent[-1]["messages"]] == ["user", "assistant", "tool"]
    assert sent[-1]["tools"][0]["function"]["name"] == "get_weather"
