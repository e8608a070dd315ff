"""Recorded programs in the agent-trace format: threads, what each call followed, tool
gaps and prompts; replayed as graphs with their gaps as timed ops."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, DagPlan, OpStep, Segment
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import load_workload
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.program_trace import RecordedCall, TracedCall, TracedQuery, query_json, traced_calls

CLUSTER = [InstanceSpec("a", "A100-80G", "llama-3.1-8b", 1, reports_capacity=True)]


def test_what_each_call_followed_from_the_times_alone():
    calls = [RecordedCall("plan", "main", 1.0, 2.0, 100, 10),
             RecordedCall("work", "a", 2.5, 4.0, 120, 5),   # thread a after the plan (0.5 s tool gap)
             RecordedCall("work", "b", 2.7, 3.0, 130, 5),   # thread b too
             RecordedCall("work", "a", 4.5, 5.0, 140, 5),   # a again: after b's (3.0) and its own (4.0) call
             RecordedCall("join", "main", 6.0, 7.0, 200, 5)]  # main: the latest (a, 5.0), its own plan (2.0)
    out = traced_calls(calls, arrival=0.25)
    assert [c.after for c in out] == [(), (0,), (0,), (1,), (0, 3)]
    assert [round(c.gap_s, 6) for c in out] == [0.75, 0.5, 0.7, 0.5, 1.0]


def test_a_recorded_query_replays_as_a_graph_with_timed_gaps(tmp_path):
    q = TracedQuery((TracedCall("plan", 64, 8, "main", (), 0.5, (Segment(7, 40), Segment(8, 24))),
                     TracedCall("act", 90, 4, "main", (0,), 2.0)), 1.5, "program", 30.0)
    path = tmp_path / "rec.jsonl"
    path.write_text(json.dumps(query_json(q, {"id": 1})) + "\n")
    [back] = read_agent_trace(str(path)).traced
    assert back == q
    wl = load_workload(str(path))
    [spec] = wl.queries
    plan = spec.plan
    assert isinstance(plan, DagPlan) and spec.arrival == 0.0 and wl.learned == {"program"}
    kinds = {n.key: (type(n.item).__name__, n.deps) for n in plan.nodes}
    assert kinds == {"g0": ("OpStep", ()), "c0": ("CallStep", ("g0",)), "g1": ("OpStep", ("c0",)),
                     "c1": ("CallStep", ("g1",))}
    c0 = next(n.item for n in plan.nodes if n.key == "c0")
    assert isinstance(c0, CallStep) and c0.prompt == (Segment(7, 40), Segment(8, 24))
    gaps = [n.item.duration_s for n in plan.nodes if isinstance(n.item, OpStep)]
    assert gaps == [0.5, 2.0]
    [out] = simulate(CLUSTER, wl, PolicySpec("flowserve", "flowserve")).queries
    assert out.failed is None and out.latency > 2.5  # the client's tool time counts


@pytest.mark.parametrize("line, match", [
    ('{"calls": [{"step": "a", "input_length": 3, "output_length": 1, "after": [0]}]}', "not earlier"),
    ('{"calls": [{"step": "a", "input_length": 3, "output_length": 1, "gap_s": -1}]}', "gap_s"),
    ('{"calls": [{"step": "a", "input_length": 3, "output_length": 1, "prompt": [[1, 2]]}]}', "sum to 2"),
    ('{"calls": [{"step": "a", "input_length": 3, "output_length": 1, "thread": 4}]}', "thread"),
    ('{"calls": [{"step": "a", "input_length": 3}]}', "output_length"),
    ('{"arrival": "soon", "calls": [{"step": "a", "input_length": 3, "output_length": 1}]}', "arrival"),
])
def test_bad_recorded_lines_get_a_clear_error(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError, match=match):
        read_agent_trace(str(path))


def test_a_truncated_or_non_utf8_recording_is_refused_by_line(tmp_path):
    good = '{"arrival": 0, "calls": [{"step": "a", "input_length": 3, "output_length": 1}]}'
    path = tmp_path / "cut.jsonl"
    path.write_text(good + "\n" + good[:30])
    with pytest.raises(ConfigError, match=r"line 2 is not JSON.*truncated"):
        load_workload(str(path))
    path.write_bytes(good.encode() + b"\n\xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_workload(str(path))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode)
       | st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                      lambda c: st.lists(c, max_size=4) | st.dictionaries(
                          st.sampled_from(["calls", "step", "input_length", "output_length", "after", "gap_s",
                                           "thread", "prompt", "arrival", "x"]), c, max_size=5),
                      max_leaves=20).map(lambda v: json.dumps(v).encode()))
def test_any_file_reads_as_a_trace_or_gets_a_config_error(tmp_path, content):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(content)
    try:
        trace = read_agent_trace(str(path))
    except ConfigError as e:
        assert "\n" not in str(e) and str(path) in str(e)  # one line that names the file
    else:
        assert trace.traced and all(q.calls for q in trace.traced)


def test_a_recording_lists_queries_as_they_ended_and_replays_them_in_arrival_order(tmp_path):
    line = '{{"arrival": {a}, "workflow": "program", "calls": [{{"step": "s", "input_length": 50, ' \
           '"output_length": 4, "after": []}}]}}'
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(line.format(a=a) for a in (7.0, 2.0, 5.0)) + "\n")
    wl = load_workload(str(path))
    assert [q.arrival for q in wl.queries] == [0.0, 3.0, 5.0]
    res = simulate(CLUSTER, wl, PolicySpec())
    assert sorted(q.arrival for q in res.queries) == [0.0, 3.0, 5.0]
    backwards = dataclasses.replace(wl, queries=tuple(reversed(wl.queries)))
    with pytest.raises(ValueError, match="arrival order"):
        simulate(CLUSTER, backwards, PolicySpec())
