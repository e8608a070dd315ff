"""A workflow with chat steps (a tool offered, a response format), run by the graph tests in
the simulator and by the gateway tests on an engine that calls tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flowserve.graph.nodes import NodeResult
from flowserve.graph.prompt import Out
from flowserve.graph.workflow import Graph, Workflow

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
