"""A workflow's chat steps (messages, tools, a response format) are written once: the
simulator runs them in its neutral chat layout (the gateway's side:
tests/gateway/test_chat_steps_live.py)."""

from __future__ import annotations

from typing import Any

import pytest
from weather_agent import TOOLS, WeatherAgent

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.errors import WorkflowError
from flowserve.graph.oracle import TableOracle
from flowserve.graph.workflow import Graph
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads.base import AppQuery, QuerySpec, Workload


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
