"""A workflow's chat steps (messages, tools, a response format) are written once: the
simulator runs them in its neutral chat layout, the gateway sends them to a real engine
as chats and hands the tool calls back to the workflow, which runs a tool loop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from tool_engine import ARGUMENTS, ToolEngine

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.errors import WorkflowError
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.settings import GatewaySettings
from flowserve.graph.nodes import NodeResult
from flowserve.graph.oracle import TableOracle
from flowserve.graph.prompt import Out
from flowserve.graph.workflow import Graph, Workflow
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef
from flowserve.workloads.base import AppQuery, QuerySpec, Workload

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
ANSWER = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}


class WeatherAgent(Workflow):
    """Asks with a tool offered; runs the tool the engine calls, then asks again with the
    result. Where no engine calls tools (the simulator), it asks again about its answer."""

    name = "weather"

    def __init__(self) -> None:
        self.chat: list[Mapping[str, Any]] = [{"role": "system", "content": "You are brief."},
                                               {"role": "user", "content": "Weather in Paris?"}]
        self.tool_args: list[dict[str, Any]] = []

    def start(self, g: Graph) -> None:
        g.llm("ask", messages=self.chat, tools=TOOLS, max_tokens=32)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        if key != "ask":
            return
        message = (result.extra or {}).get("message") or {}
        calls = message.get("tool_calls") or []
        turn = [dict(message)] if calls else [{"role": "assistant", "content": Out("ask")}]
        for call in calls:
            self.tool_args.append(json.loads(call["function"]["arguments"]))
            turn.append({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
        g.llm("answer", messages=[*self.chat, *turn], tools=TOOLS, max_tokens=32, response_format=ANSWER)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return {"answer": results["answer"].text}


def test_chat_steps_run_in_the_simulator_in_the_neutral_layout() -> None:
    oracle = TableOracle(outputs={"ask": 20, "answer": 5})
    queries = tuple(QuerySpec(i, i * 1.0, AppQuery("weather", WeatherAgent, oracle, expected_calls=2))
                    for i in range(2))
    res = simulate(BUILTIN_CLUSTERS["hetero-1"], Workload("weather", queries), PolicySpec("least_load"))
    assert [q.failed for q in res.queries] == [None, None]
    ask, answer = sorted((c for c in res.calls if c.query_id == 0), key=lambda c: c.stage != "ask")
    assert ask.output_tokens == 20 and answer.output_tokens == 5
    # the second chat holds the first one and its 20 modelled output tokens
    assert answer.input_tokens >= ask.input_tokens + 20


def test_chat_steps_run_a_tool_loop_on_a_real_engine() -> None:
    async def run(engine: ToolEngine) -> tuple[dict[str, Any], WeatherAgent]:
        spec = InstanceSpec("e", "A100-80G", engine.model, backend="openai", url=engine.url)
        built: list[WeatherAgent] = []  # the agent the core builds, to read what it saw
        driver = LiveDriver([spec], GatewaySettings(engine_kinds={"e": "vllm"}),
                            workflows={"weather": lambda: built.append(WeatherAgent()) or built[-1]})
        await driver.start()
        try:
            result = await driver.run("weather", WorkflowRef("weather"), model=engine.model)
            assert result.status == "completed", result.reason
            [agent] = built
            return result.output, agent
        finally:
            await driver.shutdown()

    with ToolEngine() as engine:
        out, agent = asyncio.run(asyncio.wait_for(run(engine), 60))
        sent = engine.bodies("/v1/chat/completions")
    assert agent.tool_args == [json.loads(ARGUMENTS)]
    assert out == {"answer": "it is sunny"}
    assert [m["role"] for m in sent[1]["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent[1]["response_format"] == ANSWER and sent[0]["tools"] == TOOLS


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"prompt": "x", "messages": [{"role": "user", "content": "x"}]}, "either a prompt or chat messages"),
    ({}, "either a prompt or chat messages"),
    ({"prompt": "x", "tools": TOOLS}, "tools are offered in chats"),
    ({"messages": [{"content": "x"}]}, "needs a role"),
    ({"messages": []}, "empty prompt"),
])
def test_a_step_is_a_prompt_or_a_chat(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(WorkflowError, match=needle):
        Graph({}).llm("s", max_tokens=4, **kwargs)
