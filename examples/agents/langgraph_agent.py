"""A tool-using agent built with LangGraph (`langchain-openai` pointed at flowserve), served
as one program: the model decides when to call the agent's tools; flowserve relays the tool
calls and schedules the whole loop — every model call of one run — as one program.

    flowserve serve --config examples/serve-llama.yaml --port 8000 &
    python examples/agents/langgraph_agent.py --url http://127.0.0.1:8000 --api-key sk-local-1 "Weather in Paris?"

The graph is LangGraph's own: a model node that may answer with tool calls, a tool node
that runs them, and an edge back until the model answers in text. The only flowserve part
is `program(...)`: its headers go on every request `ChatOpenAI` sends (`default_headers`),
and leaving it ends the program and returns its summary.
"""

from __future__ import annotations

import argparse
import json
from typing import Annotated, Any, TypedDict

import openai
from langchain_core.messages import AnyMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from flowserve.client import program

FORECASTS = {"paris": "sunny, 21 °C", "oslo": "rain, 9 °C"}


@tool
def get_weather(city: str) -> str:
    """The weather forecast for a city."""
    return FORECASTS.get(city.lower(), "no forecast")


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_agent(url: str, model: str, api_key: str, headers: dict[str, str]) -> Any:
    """The LangGraph agent: model ⇄ tools until the model answers."""
    llm = ChatOpenAI(model=model, base_url=f"{url}/v1", api_key=api_key, default_headers=headers,
                     temperature=0, max_retries=0).bind_tools([get_weather])

    def think(state: State) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(State)
    graph.add_node("think", think)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "think")
    graph.add_conditional_edges("think", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "think")
    return graph.compile()


def run(url: str, model: str, question: str, api_key: str | None = None,
        slo_ms: float | None = 60_000) -> dict[str, Any]:
    """One run of the agent as one program; its answer, its messages and the program's summary."""
    p = program(url, api_key=api_key, slo_ms=slo_ms)
    with p:  # the one flowserve line: every model call below is one program
        agent = build_agent(url, model, p.api_key, p.headers)
        out = agent.invoke({"messages": [("user", question)]})
    messages = out["messages"]
    usage = [m.usage_metadata for m in messages if getattr(m, "usage_metadata", None)]
    return {"answer": messages[-1].content, "messages": [type(m).__name__ for m in messages],
            "model_calls": len(usage), "prompt_tokens": sum(u["input_tokens"] for u in usage),
            "output_tokens": sum(u["output_tokens"] for u in usage), "program": p.summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("question")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default=None, help="default: the first model the endpoint serves")
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args()
    if args.model is None:  # the first model the endpoint lists
        models = openai.OpenAI(base_url=f"{args.url}/v1", api_key=args.api_key or "none").models.list().data
        if not models:
            raise SystemExit(f"{args.url} serves no model")
        args.model = models[0].id
    print(json.dumps(run(args.url, args.model, args.question, args.api_key), indent=2, default=str))


if __name__ == "__main__":
    main()
