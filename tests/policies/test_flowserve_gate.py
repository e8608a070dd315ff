"""The flowserve queue's batch floor in a quick simulation: an interactive flood does not
starve the batch work beside it (the gate's formulas by hand are in test_sweet_spot)."""

from __future__ import annotations

import numpy as np

from flowserve.config import load_cluster
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.workloads import load_workload
from flowserve.workloads.mixes import mix, tag
from flowserve.workloads.sql_jobs import llm_sql_job


def test_batch_work_gets_its_share_under_an_interactive_flood() -> None:
    cluster = load_cluster("hetero-1")
    flood = load_workload("text2sql-mixed", {"rate": 3.0, "queries": 30, "seed": 3})  # ~2× what it completes
    horizon = max(q.arrival for q in flood.queries)
    job = llm_sql_job(2, 5, start_s=1.0, every_s=horizon / 3)  # two statements of 540 and 749 calls
    wl = mix("flood", [tag(flood, 0, "gold"), tag(job, 1, "etl", "batch")])
    batch = {q.id for q in wl.queries if q.cls == "batch"}
    got, alone = {}, standalone_times(wl, cluster)
    for floor in (True, False):
        res = simulate(cluster, wl, PolicySpec("flowserve", "flowserve",
                                               queue_params={"batch_floor": floor, "tenant_weights": "gold:3"}),
                       slo_scale=2.0, standalone=alone, record_calls=False)
        assert len(res.queries) == len(wl.queries) and all(q.failed is None for q in res.queries)
        got[floor] = (np.mean([q.latency for q in res.queries if q.id in batch]),
                      np.mean([q.latency for q in res.queries if q.id not in batch]))
    (batch_floor, inter_floor), (batch_none, inter_none) = got[True], got[False]
    # without the floor the statements wait for the flood to drain (63 and 67 s); with it they
    # keep a batch call running while the flood's first call is at risk, and take their
    # quarter of the spot (etl's weight 1 beside gold's 3) whenever it is not (46 and 51 s)
    assert batch_floor < 0.8 * batch_none
    assert inter_floor < 1.05 * inter_none  # the flood hardly pays for it: 51.0 s against 50.4 s
