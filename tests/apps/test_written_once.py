"""A workflow is written once: the live Text-to-SQL app runs unchanged in the simulator,
with an oracle standing in for what only a simulated run knows."""

from __future__ import annotations

import shutil

import pytest

from flowserve.apps.text2sql import TEXT2SQL
from flowserve.apps.text2sql.agent import CAND, EXEC, KW, REVISE, SEL
from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.graph.oracle import TableOracle, ToolOutcome
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads.base import AppQuery, QuerySpec, Workload


@pytest.fixture(scope="module")
def t2s():
    prepared = TEXT2SQL.prepare({"max_rounds": 2})
    yield prepared
    for path in prepared["_cleanup"]:
        shutil.rmtree(path, ignore_errors=True)


def test_the_live_text2sql_workflow_runs_in_the_simulator_with_an_oracle(t2s):
    oracle = TableOracle(
        outputs={"keywords": 12, "schema": 6, "cand0": 60, "cand0.rev1": 40},
        tools={"entities": ToolOutcome(0.01, output_tokens=30), "context": ToolOutcome(0.01, output_tokens=50),
               "cand0.exec": ToolOutcome(0.05, error="no such column: amount"),
               "cand0.rev1.exec": ToolOutcome(0.02, value={"columns": ["n"], "rows": [[3]]})})
    done: list = []

    def make():
        wf = TEXT2SQL.build({"question": "How many accounts?", "candidates": 1}, t2s, None)
        done.append(wf)
        return wf

    queries = tuple(QuerySpec(i, i * 2.0, AppQuery("text2sql", make, oracle, expected_calls=4))
                    for i in range(3))
    res = simulate(BUILTIN_CLUSTERS["hetero-1"], Workload("t2s-app", queries), PolicySpec("least_load"))
    assert [q.failed for q in res.queries] == [None] * 3
    stages = [c.stage for c in res.calls if c.query_id == 0]
    assert sorted(stages) == sorted([KW, SEL, CAND, REVISE])
    # The oracle's output lengths reached the engines; the revise prompt read cand0's output.
    by_stage = {c.stage: c for c in res.calls if c.query_id == 0}
    assert by_stage[REVISE].output_tokens == 40
    assert by_stage[REVISE].input_tokens > 60
    # The workflow saw the oracle's tool outcomes: one revise round, then the result.
    wf = done[-1]
    out = wf.output({})
    assert out["status"] == "ok" and out["revise_rounds"] == 1 and out["rows"] == [[3]]
    assert res.queries[0].latency > 0.05 + 0.02 and EXEC == "execute_sql"
    # Its standalone latency (the SLO's unit) was measured by simulating it alone.
    assert all(q.standalone_s > 0 for q in res.queries)
