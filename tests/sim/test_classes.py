"""Batch work, tenants and the clairvoyant predictor in the simulator (tiny sizes)."""

from __future__ import annotations

from batch_job import BATCH_WORKFLOW, batch_job

from flowserve.config import load_cluster
from flowserve.graph.replay import plan_oracle
from flowserve.sim.clairvoyant import ClairvoyantPredictor
from flowserve.sim.compare import interactive_only, tenant_shares
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload
from flowserve.workloads.mixes import mix, shift_plan, tag


def small_mix():
    t2s = load_workload("text2sql-mixed", {"rate": 0.5, "queries": 6, "seed": 1})
    job = batch_job(40, seed=2)
    return mix("m", [tag(t2s, 0, "gold"), tag(job, 1, "etl", "batch")])


def test_batch_queries_have_no_deadline_and_every_query_finishes() -> None:
    wl = small_mix()
    specs = load_cluster("hetero-1")
    res = simulate(specs, wl, PolicySpec("flowserve", "flowserve"), slo_scale=4.0)
    assert all(q.failed is None for q in res.queries)
    batch = [q for q in res.queries if q.workflow == BATCH_WORKFLOW]
    assert len(batch) == 40 and all(q.deadline is None and q.met is None for q in batch)
    assert all(q.deadline is not None for q in interactive_only(res, {q.id for q in batch}).queries)
    shares = tenant_shares(res, {q.id: q.tenant for q in wl.queries})
    assert set(shares) == {"gold", "etl"} and abs(sum(shares.values()) - 1.0) < 1e-3


def test_segments_of_mix_parts_never_collide() -> None:
    wl = small_mix()
    ids = [{s.id for c in q.plan.calls() for s in c.prompt} for q in wl.queries]
    t2s = set().union(*(i for i, q in zip(ids, wl.queries, strict=True) if q.cls == "interactive"))
    job = set().union(*(i for i, q in zip(ids, wl.queries, strict=True) if q.cls == "batch"))
    assert t2s and job and not t2s & job
    plan = wl.queries[0].plan
    assert shift_plan(shift_plan(plan, 5), -5) == plan


def test_clairvoyant_predictor_knows_each_calls_true_length() -> None:
    wl = batch_job(5, seed=3)
    pred = ClairvoyantPredictor(wl)
    for q in wl.queries:
        (key, true), = plan_oracle(q.plan).outputs.items()
        assert pred.predict_call(q.id, key, BATCH_WORKFLOW, "llm_row") == max(1, true)
    assert pred.predict_call(999, "s0.0", BATCH_WORKFLOW, "llm_row") == pred.predict(BATCH_WORKFLOW, "llm_row")


def test_tenant_latency_means_completed_queries_per_tenant() -> None:
    from flowserve.sim.compare import tenant_latency
    from flowserve.sim.simulator import QueryOutcome, SimResult

    qs = [QueryOutcome(1, "w", 0, 2, 2.0, 1, None, None), QueryOutcome(2, "w", 0, 4, 4.0, 1, None, None),
          QueryOutcome(3, "w", 0, 9, 9.0, 1, None, None, failed="boom")]
    assert tenant_latency(SimResult(qs, [], [], [], 9, 0, 0, 0), {1: "a", 2: "a", 3: "b"}) == {"a": 3.0}
