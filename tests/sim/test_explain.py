"""`bench explain`: the decision log changes nothing, decisions are classified by hand, and
two policies' divergences are reported with their cost."""

from __future__ import annotations

from flowserve.config import load_cluster
from flowserve.sim.compare import CONTESTANTS
from flowserve.sim.explain import Seen, explain, run_logged
from flowserve.sim.run import simulate
from flowserve.workloads.mixes import SINGLE


def seen(hits: dict[str, int], chosen: str) -> Seen:
    return Seen(1, (1, "n", 0), 0.0, 1000, chosen, hits, {k: 0 for k in hits})


def test_kinds_by_hand() -> None:
    assert seen({"a": 0, "b": 40}, "a").kind == "cold"  # nobody caches 64 tokens
    assert seen({"a": 900, "b": 890}, "b").kind == "followed"  # within a block of the best
    assert seen({"a": 900, "b": 880}, "b").kind == "left"
    assert seen({"a": 900, "b": 880}, "a").kind == "followed"


def test_the_log_leaves_every_decision_as_it_was() -> None:
    case = SINGLE["tool_use"]
    logged = run_logged(case, 4, 3, 4.0, CONTESTANTS["prefix_affinity"], "prefix_affinity")
    specs = load_cluster(case.cluster)
    plain = simulate(specs, case.build(4, 3), CONTESTANTS["prefix_affinity"], 4.0)
    assert sorted((c.call_id, c.instance) for c in logged.result.calls) == sorted(
        (c.call_id, c.instance) for c in plain.calls)
    assert len(logged.seen) >= len(plain.calls) > 0
    assert {s.chosen for s in logged.seen} <= {c.instance for c in plain.calls}


def test_prefix_blind_round_robin_leaves_the_prefix_far_more_than_prefix_affinity() -> None:
    report = explain(SINGLE["tool_use"], 4, 3, 4.0, CONTESTANTS["prefix_affinity"], CONTESTANTS["round_robin"],
                     ("prefix_affinity", "round_robin"))
    pa, rr = report["policies"]["prefix_affinity"], report["policies"]["round_robin"]
    assert rr["left_prefix"] > pa["left_prefix"] and rr["token_hit_rate"] < pa["token_hit_rate"]
    assert rr["re_prefilled"] <= rr["left_prefix"] and rr["extra_prefill_s"] > 0
    assert report["matched_calls"] > 0 and report["divergences"]
    rows = {(r["a"], r["b"]): r for r in report["divergences"]}
    assert ("followed", "left") in rows and rows[("followed", "left")]["prefill_s"] > 0
    assert report["findings"][1].startswith(f"round_robin left the cached prefix for load on {rr['left_prefix']}")
