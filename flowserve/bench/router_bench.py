"""`flowserve bench router`: E2 dispatch decisions per second on one core (SPEC §7 goal
≥ 10,000/s for 2k-token prompts; Preble's Python scheduler: 245–2,931 req/s).

The index is built like a long tool-use history: a 200-token system prompt, `tools`
tool instructions of 1,600 tokens under it, 50 questions of 200 tokens under each, held
by four Mistral-7B/A6000 instances (tool k on instance k mod 4) with request history in
the window, and far more cached than an instance's KV capacity, so every explore
decision computes M_i over real LRU evictions. A decision is what the core does per
dispatched call with this policy: `choose` (match, L, M, R, exploit/explore, rebalance)
plus the index update `add` (presence, LRU, per-node history). Prompts are materialised
before timing (tokenisation is not the router's work).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.apps.single import SingleCall
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.config import load_cluster
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import CallState, QueryState
from flowserve.graph.plan import Materializer, Segment
from flowserve.graph.runtime import QueryRun
from flowserve.metrics.tables import markdown_table, write_json
from flowserve.policies import make_dispatch, queue_factory
from flowserve.types.work import LLMCall, Query, WorkflowRef

QUESTIONS_PER_TOOL = 50
SYSTEM, TOOL, QUESTION = 200, 1600, 200


def _call(i: int, prompt: tuple[int, ...]) -> CallState:
    """One call of its own one-call query, as the core holds it (profiles read the query's class)."""
    wf = SingleCall("tool_call", prompt, 64, None)
    q = Query(i, 0.0, "tool_use", WorkflowRef(SingleCall.name, ("tool_call", prompt, 64, None)))
    call = LLMCall(i, i, "n", "tool_call", "tool_use", prompt, predicted_output=43, max_tokens=64)
    return CallState.of(call, QueryState(q, QueryRun(wf, i)))


def run_router_bench(nodes: int, decisions: int, json_out: Path, console: Console,
                     seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    mat = Materializer()
    specs = load_cluster("preble-a6000")
    dispatch = make_dispatch("preble_e2")
    harness = PolicyHarness.for_cluster(specs, queue_factory("fcfs"), prefix_index=PrefixIndex(dispatch.window_s))
    idx = harness.prefix_index
    assert idx is not None
    names = [s.name for s in specs]
    candidates = harness.candidates()
    tools = max(1, -(-nodes // (QUESTIONS_PER_TOOL + 1)))
    system = Segment(1, SYSTEM)
    seg = iter(range(10, 1 << 40))
    window = dispatch.window_s

    def prompt(tool: int, question: int | None = None) -> tuple[int, ...]:
        q = next(seg) if question is None else question
        return mat.prompt((system, Segment(1000 + tool, TOOL), Segment(10_000_000 + q, QUESTION)))

    t0 = time.perf_counter()
    n_built = 0
    for k in range(tools):
        for _ in range(QUESTIONS_PER_TOOL):
            now = float(rng.uniform(0, window))
            idx.add(prompt(k), names[k % len(names)], now)
            n_built += 1
    # the engines evict down to their KV capacity; the evicted nodes stay in the tree
    # as long as requests used them within the window (Preble's garbage collection)
    for inst in candidates:
        cap = inst.kv_capacity
        while idx.cached_tokens[inst.name] > cap:
            node = next(idx.lru_nodes(inst.name))
            idx.discard(inst.name, idx.path_tokens(node), node.depth - len(node.key), window)
    build_s = time.perf_counter() - t0
    tree_nodes = len(idx)
    # timed decisions: 80% a known tool with a new question, 20% a new tool
    new_tools = iter(range(tools, tools + decisions))
    batch = [prompt(int(rng.integers(tools))) if rng.random() < 0.8 else prompt(next(new_tools))
             for _ in range(decisions)]
    calls = [_call(i, p) for i, p in enumerate(batch)]
    gap = 1e-3  # virtual seconds between decisions: 1,000 requests/s keep arriving
    t0 = time.perf_counter()
    for i, cs in enumerate(calls):
        dispatch.choose(cs, candidates, harness.at(window + i * gap))
    choose_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i, cs in enumerate(calls):  # as the core does: choose, then record the prompt
        now = window + i * gap
        inst = dispatch.choose(cs, candidates, harness.at(now))
        idx.add(cs.call.prompt, inst.name, now)
    full_s = time.perf_counter() - t0
    data = {
        "bench": "router", "python": platform.python_version(), "machine": platform.machine(),
        "tree_nodes": tree_nodes, "prompts_indexed": n_built, "prompt_tokens": SYSTEM + TOOL + QUESTION,
        "build_s": build_s, "decisions": decisions,
        "choose_per_s": decisions / choose_s, "decision_per_s": decisions / full_s,
        "goal_per_s": 10_000, "preble_paper_per_s": [245, 2931], "policy_stats": dict(dispatch.stats),
    }
    console.print(markdown_table(
        ["tree nodes", "prompt tokens", "choose/s", "choose+index update/s", "goal/s"],
        [[tree_nodes, SYSTEM + TOOL + QUESTION, round(data["choose_per_s"]), round(data["decision_per_s"]),
          10_000]]), highlight=False)
    console.print(f"E2 counters: {data['policy_stats']}  (index built in {build_s:.1f} s)", highlight=False)
    write_json(json_out, data)
    console.print(f"json: {json_out}")
    return data
