"""Preble workloads: Table 1 sharing statistics within tolerance, structure, config errors,
and an end-to-end simulation where E2 beats round-robin on the shared-prefix workloads."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload
from flowserve.workloads.preble import TARGETS, bursty_times, sharing_stats

SIZES = {"tool_use": 1500, "embodied_agent": 80, "programming": 150, "video_qa": 800, "long_doc_qa": 500}


@pytest.mark.parametrize("kind", list(SIZES))
def test_sharing_statistics_match_table_1(kind):
    stats = sharing_stats(load_workload(kind, {"queries": SIZES[kind], "seed": 3}))
    target = TARGETS[kind]
    assert stats["prompt_mean"] == pytest.approx(target["prompt"], rel=0.12)
    assert stats["output_mean"] == pytest.approx(target["output"], rel=0.15)
    # tool use: a tool's first request shares only the system prompt, so the measured
    # share approaches Table 1's 85% from below as the trace grows (0.77 at 1,500)
    # the popular tools' lengths drive tool use's key portion too (Table 1: 76% ± 15%)
    tol = 0.09 if kind == "tool_use" else 0.05
    assert stats["shared"] == pytest.approx(target["shared"], abs=tol)
    assert stats["key_portion"] == pytest.approx(target["key"], abs=tol)
    assert 20 <= stats["prompt_output_ratio"] <= 2600


def test_structures():
    tool = load_workload("tool_use", {"queries": 2000, "seed": 1})
    counts = np.bincount([q.plan.attrs["tool"] for q in tool.queries])
    assert counts[0] > 5 * np.median(counts[counts > 0])  # Zipf: the top tool dominates
    agent = load_workload("embodied_agent", {"queries": 5, "seed": 1})
    for q in agent.queries:
        prompts = [step[0].prompt for step in q.plan.steps]
        assert len(prompts) >= 8
        for prev, nxt in itertools.pairwise(prompts):
            assert nxt[: len(prev)] == prev and len(nxt) == len(prev) + 1  # chained growth
    code = load_workload("programming", {"queries": 3, "seed": 1})
    for q in code.queries:
        (step,) = q.plan.steps
        assert len(step) == 8 and len({s.prompt for s in step}) == 1  # parallel samples
    capped = load_workload("long_doc_qa", {"queries": 50, "max_prompt": 8000})
    assert max(c.input_tokens for q in capped.queries for c in q.plan.calls()) <= 8000


def test_mixed_combines_two_kinds_without_segment_collisions():
    wl = load_workload("mixed", {"queries": 200, "rate": 4.0})
    kinds = {q.plan.workflow for q in wl.queries}
    assert kinds == {"tool_use", "video_qa"} and len(wl.queries) == 200
    arrivals = [q.arrival for q in wl.queries]
    assert arrivals == sorted(arrivals)
    seg_kind: dict[int, str] = {}
    for q in wl.queries:
        for c in q.plan.calls():
            assert isinstance(c, CallStep)
            for s in c.prompt:
                assert seg_kind.setdefault(s.id, q.plan.workflow) == q.plan.workflow


def test_bursty_arrivals_keep_the_rate_and_are_burstier_than_poisson():
    rng = np.random.default_rng(0)
    t = bursty_times(rng, 20_000, 5.0)
    assert len(t) / t[-1] == pytest.approx(5.0, rel=0.1)
    counts = np.bincount((t // 10).astype(int))  # arrivals per 10 s
    assert counts.var() / counts.mean() > 3  # Poisson would be ≈ 1


def test_bad_workload_config_errors():
    with pytest.raises(ConfigError, match="rate"):
        load_workload("video_qa", {"rate": -1})
    with pytest.raises(ConfigError, match="kinds"):
        load_workload("mixed", {"kinds": ["tool_use"]})
    with pytest.raises(ConfigError, match="arrival"):
        load_workload("tool_use", {"arrival": "weekly"})


def test_e2_beats_round_robin_on_long_shared_prefixes():
    cluster = load_cluster("preble-a6000")
    wl = load_workload("video_qa", {"queries": 120, "rate": 3.0, "seed": 2, "max_prompt": 32000})
    runs = {}
    for label, policy in (("rr", PolicySpec()), ("e2", PolicySpec("preble_e2", "prefix_groups"))):
        res = simulate(cluster, wl, policy)
        assert all(q.failed is None for q in res.queries) and len(res.queries) == 120
        prompt = sum(c.input_tokens for c in res.calls)
        runs[label] = (np.mean([c.finished - c.ready for c in res.calls]),
                       sum(c.cached_tokens for c in res.calls) / prompt)
    assert runs["e2"][1] > runs["rr"][1] + 0.1  # questions follow their video
    assert runs["e2"][0] < runs["rr"][0]
