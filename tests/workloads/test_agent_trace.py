"""Generic agent trace replay: any step names, parallel groups, per-stage expectations."""

from __future__ import annotations

import json

import pytest

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import load_workload, workload_config
from flowserve.workloads.agent_trace import group_steps, read_agent_trace, stage_counts

MACSQL = [
    {"MACSQLRequest": [{"step": "Selector", "input_length": 2100, "output_length": 180},
                       {"step": "Decomposer", "input_length": 1500, "output_length": 240},
                       {"step": "Refiner", "input_length": 900, "output_length": 120},
                       {"step": "Refiner", "input_length": 950, "output_length": 110}]},
    {"MACSQLRequest": [{"step": "Selector", "input_length": 1800, "output_length": 150},
                       {"step": "Decomposer", "input_length": 1400, "output_length": 200},
                       {"step": "Decomposer", "input_length": 1300, "output_length": 210}]},
]


@pytest.fixture
def macsql(tmp_path):
    path = tmp_path / "macsql.json"
    path.write_text(json.dumps(MACSQL))
    return str(path)


def test_any_step_names_become_stages(macsql):
    trace = read_agent_trace(macsql)
    assert trace.steps() == ["Selector", "Decomposer", "Refiner"]
    wl = _load(macsql, parallel=["Decomposer"])
    assert len(wl.queries) == 2
    q1 = wl.queries[1].plan
    # The two adjacent Decomposer calls form one parallel step; Refiner calls stay sequential.
    assert [len(s) for s in q1.steps] == [1, 2]
    assert [len(s) for s in wl.queries[0].plan.steps] == [1, 1, 1, 1]
    assert {c.stage for q in wl.queries for c in q.plan.calls()} == {"Selector", "Decomposer", "Refiner"}
    first: CallStep = wl.queries[0].plan.calls()[0]
    assert first.input_tokens == 2100 and first.output_tokens == 180
    # Calls of one stage share its instruction prefix (half the stage's shortest input).
    sel = [q.plan.calls()[0] for q in wl.queries]
    assert sel[0].prompt[0] == sel[1].prompt[0] and sel[0].prompt[0].length == 900
    assert wl.output_priors[("agent:macsql", "Decomposer")] == pytest.approx(650 / 3)


def _load(file: str, **extra):
    return workload_config({"kind": "agent_trace", "file": file, "rate": 1.0, **extra}, "test").build()


def test_expected_remaining_is_conditional_on_what_was_issued(macsql):
    counts = stage_counts(read_agent_trace(macsql))
    # Refiner counts per query (2, 0): before any, E[N] = 1; after one, E[N−1 | N ≥ 1] = 1.
    est = {e.stage: e.count for e in counts({}, {})}
    assert est == {"Selector": 1.0, "Decomposer": 1.5, "Refiner": 1.0}
    est = {e.stage: e.count for e in counts({"Selector": 1, "Decomposer": 2, "Refiner": 1}, {})}
    assert est == {"Refiner": 1.0}


def test_group_steps_only_groups_adjacent_parallel_steps():
    calls = [("a", 1, 1), ("b", 1, 1), ("b", 1, 1), ("a", 1, 1), ("a", 1, 1)]
    assert [len(g) for g in group_steps(calls, frozenset({"b"}))] == [1, 2, 1, 1]


def test_macsql_trace_replays_completely_in_the_simulator(macsql):
    wl = _load(macsql, queries=40, parallel=["Decomposer"])
    res = simulate(BUILTIN_CLUSTERS["hetero-1"], wl, PolicySpec("hexgen_wb", "urgency"))
    assert len(res.queries) == 40 and all(q.failed is None for q in res.queries)
    assert len(res.calls) == wl.calls


def test_chess_preset_still_maps_its_steps_and_refuses_others(macsql):
    from flowserve.workloads.text2sql import load_trace_file
    queries, db = load_trace_file("chess-trace1")
    assert len(queries) == 90 and db == "financial"
    with pytest.raises(ConfigError, match=r"not a CHESS step.*agent_trace"):
        load_trace_file(macsql)


@pytest.mark.parametrize("content, match", [
    (b"\xff\xfe{", "not UTF-8"),
    (b"{}", "list of queries"),
    (b"[]", "no queries"),
    (b'[{"R": [{"step": "a", "input_length": -1, "output_length": 2}]}]', "non-negative"),
    (b'[{"R": []}]', "no calls"),
    (b'[{"R": [{"input_length": 1, "output_length": 2}]}]', "step"),
])
def test_bad_traces_get_a_clear_error(tmp_path, content, match):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=match):
        read_agent_trace(str(path))


def test_long_prompts_are_sized_to_the_smallest_context():
    small = InstanceSpec("a", "A6000", "llama-2-7b", 1)  # 4,096-token context
    wl = load_workload("long_doc_qa", {"queries": 20}, max_context=4096)
    assert max(c.input_tokens for q in wl.queries for c in q.plan.calls()) <= 4096 - 256
    assert any("4096 tokens" in n for n in wl.notes)
    res = simulate([small], wl, PolicySpec("round_robin", "fcfs"))
    assert all(q.failed is None for q in res.queries)
    told = load_workload("long_doc_qa", {"queries": 20, "max_prompt": 100_000}, max_context=4096)
    assert not told.notes
    res = simulate([small], told, PolicySpec("round_robin", "fcfs"))
    # Prompts over the context fail their own query only, with the reason.
    failed = [q for q in res.queries if q.failed]
    assert failed and all("exceeds the model's context" in q.failed for q in failed)
    assert len(res.queries) == 20


def test_parallel_must_name_steps_of_the_trace(macsql):
    with pytest.raises(ConfigError, match="Selektor"):
        _load(macsql, parallel=["Selektor"])
