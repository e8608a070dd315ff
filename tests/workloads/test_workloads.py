from collections import Counter

import numpy as np
import pytest

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, Materializer, OpStep, QueryPlan, Segment
from flowserve.workloads import load_workload, text2sql
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.trace import read_trace, write_trace


def test_text2sql_structure_follows_chess():
    wl = load_workload("text2sql", {"queries": 300, "seed": 7})
    assert len(wl.queries) == 300
    for q in wl.queries:
        plan = q.plan
        stages = [tuple(i.stage for i in step) for step in plan.steps]
        counts = Counter(c.stage for c in plan.calls())
        assert counts[text2sql.IR] == 4
        assert counts[text2sql.CAND] >= 2
        assert (text2sql.CAND, text2sql.CAND) in stages  # candidates run in parallel
        assert counts[text2sql.REVISE] <= 10
        assert counts[text2sql.UT] == 3
        # every revise round is followed by SQL execution; the last one succeeds
        execs = [s[0] for s in plan.steps if isinstance(s[0], OpStep)]
        assert len(execs) == counts[text2sql.REVISE] + 1
        assert not execs[-1].error and all(e.error for e in execs[:-1])
        assert 9 <= len(plan.calls()) <= 32  # traces: 10–28; the generator can combine extremes
        if counts[text2sql.EVAL]:
            assert counts[text2sql.GUT] == 1
    dbs = Counter(q.plan.attrs["db"] for q in wl.queries)
    assert set(dbs) == {"financial", "formula1"}  # the default trace is mixed


def test_prompts_of_a_database_share_the_schema_prefix():
    wl = load_workload("text2sql-formula1", {"queries": 20, "seed": 1})
    cands = [c for q in wl.queries for c in q.plan.calls() if c.stage == text2sql.CAND]
    firsts = {c.prompt[0] for c in cands}
    assert len(firsts) == 1 and next(iter(firsts)).length == 9000
    mat = Materializer()
    a, b = (mat.prompt(c.prompt) for c in cands[:2])
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert common == 9000
    # revise rounds of one query share a per-query segment on top of the schema
    for q in wl.queries:
        revs = [c for c in q.plan.calls() if c.stage == text2sql.REVISE]
        if len(revs) >= 2:
            assert revs[0].prompt[1] == revs[1].prompt[1]
            assert revs[0].prompt[2] != revs[1].prompt[2]
            break
    else:
        pytest.fail("no query with two revise rounds")


def test_generator_is_deterministic_per_seed():
    a = load_workload("text2sql", {"queries": 30, "seed": 3})
    b = load_workload("text2sql", {"queries": 30, "seed": 3})
    c = load_workload("text2sql", {"queries": 30, "seed": 4})
    assert a.queries == b.queries
    assert a.queries != c.queries


def test_generator_means_match_the_traces():
    for db, trace in text2sql_pairs():
        real, _ = text2sql.load_trace_file(trace)
        wl = text2sql.synthetic(db, 1.0, 1500, 0)
        synth_calls = np.mean([len(q.plan.calls()) for q in wl.queries])
        real_calls = np.mean([len(c) for c in real])
        assert synth_calls == pytest.approx(real_calls, rel=0.05)
        synth_rev = np.mean([sum(c.stage == text2sql.REVISE for c in q.plan.calls()) for q in wl.queries])
        real_rev = np.mean([sum(s == text2sql.REVISE for s, _, _ in c) for c in real])
        assert synth_rev == pytest.approx(real_rev, rel=0.1)


def text2sql_pairs():
    return (("financial", "chess-trace1"), ("formula1", "chess-trace2"))


def test_chess_trace_replay_groups_parallel_steps_and_cycles():
    real, _ = text2sql.load_trace_file("chess-trace1")
    wl = load_workload("chess-trace1", {"queries": len(real) + 5, "seed": 0})
    assert len(wl.queries) == len(real) + 5
    for i, q in enumerate(wl.queries):
        calls = [(c.stage, c.input_tokens, c.output_tokens) for c in q.plan.calls()]
        assert calls == real[i % len(real)]
        for step in q.plan.steps:
            if len(step) > 1:
                assert len({x.stage for x in step}) == 1
                assert step[0].stage in (text2sql.CAND, text2sql.EVAL)
    # the first query: IR KW IR IR IR [C C] exec R exec UT GUT UT [E×5] UT
    shape = [len(s) for s in wl.queries[0].plan.steps]
    assert shape[:6] == [1, 1, 1, 1, 1, 2]
    assert max(shape) == 5


def test_trace_file_round_trip(tmp_path):
    wl = load_workload("text2sql", {"queries": 15, "seed": 2})
    path = tmp_path / "t.jsonl"
    write_trace(path, wl.queries)
    back = read_trace(path)
    assert back.queries == wl.queries


def test_bad_trace_lines_are_reported(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": 1, "arrival": 0, "workflow": "x", "steps": [[{"stage": "a"}]]}\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        read_trace(p)
    p.write_text('{"id": 1, "arrival": 0, "workflow": "x", "dag": ['
                 '{"key": "a", "deps": ["b"], "stage": "s", "op": "o", "duration": 1}]}\n')
    with pytest.raises(ConfigError, match="not listed before it"):
        read_trace(p)


def test_arrival_processes_have_the_requested_rate_and_cv():
    rng = np.random.default_rng(0)
    t = arrival_times(rng, 20000, 2.0)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(0.5, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    g = np.diff(arrival_times(rng, 20000, 2.0, "gamma", cv=3.0))
    assert g.mean() == pytest.approx(0.5, rel=0.1)
    assert g.std() / g.mean() == pytest.approx(3.0, rel=0.1)
    with pytest.raises(ConfigError, match="positive"):
        arrival_times(rng, 5, 0.0)


def test_workload_config_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="rate: Input should be greater than 0"):
        load_workload("text2sql", {"rate": -1})
    with pytest.raises(ConfigError, match="queries: required field is missing"):
        load_workload(str(_yaml(tmp_path, "kind: text2sql\nrate: 1\n")))
    with pytest.raises(ConfigError, match="unknown workload kind 'nope'"):
        load_workload(str(_yaml(tmp_path, "kind: nope\n")))
    with pytest.raises(ConfigError, match="neither a file nor a built-in"):
        load_workload("no-such-workload")
    with pytest.raises(ConfigError, match="gamma arrivals need `cv`"):
        load_workload("text2sql", {"arrival": "gamma"})
    with pytest.raises(ConfigError, match="cycle"):
        load_workload(str(_yaml(tmp_path, "kind: dag\nrate: 1\nqueries: 2\nnodes:\n"
                                          "  - {name: a, input: 9, deps: [a]}\n")))


def _yaml(tmp_path, text):
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


def test_materializer_preserves_segment_prefix_relations():
    m = Materializer()
    a = m.prompt((Segment(1, 50), Segment(2, 30)))
    b = m.prompt((Segment(1, 50), Segment(3, 30)))
    c = m.prompt((Segment(1, 20),))
    assert len(a) == 80 and a[:50] == b[:50] and a[50] != b[50]
    assert a[:20] == c  # a shorter segment of the same id is a prefix
    plan = QueryPlan("w", ((CallStep("s", (Segment(1, 5),), 3),),))
    assert plan.calls()[0].input_tokens == 5
