"""A workflow's chat steps through the gateway: it sends them to an engine as chats and hands
the tool calls back to the workflow, which runs a tool loop (the simulator's side:
tests/graph/test_chat_steps.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tool_engine import ARGUMENTS, ToolEngine
from weather_agent import ANSWER, TOOLS, WeatherAgent

from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef


def test_chat_steps_run_a_tool_loop_on_a_real_engine() -> None:
    async def run(engine: ToolEngine) -> tuple[dict[str, Any], WeatherAgent]:
        spec = InstanceSpec("e", "A100-80G", engine.model, backend="openai", url=engine.url)
        built: list[WeatherAgent] = []  # the agent the core builds, to read what it saw
        driver = compose_driver([spec], GatewaySettings(engine_kinds={"e": "vllm"}),
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
