"""`evaluate`'s search of the SLO-scale grid: the bisection asks few scales and finds the
minimum scale the whole grid finds, so the demo's ranking stays what every scale gives."""

import pytest

from flowserve.config import load_cluster
from flowserve.sim.evaluate import DEFAULT_SLO_SCALES, bisect_first, evaluate
from flowserve.sim.run import PolicySpec, standalone_times
from flowserve.workloads import load_workload


def test_bisection_asks_the_last_value_then_halves_down_to_the_answer_and_its_neighbour():
    grid = [1, 2, 3, 4, 5, 6, 7, 8]
    asked: list[int] = []

    def ok(x: int) -> bool:
        asked.append(x)
        return x >= 6

    assert bisect_first(grid, ok) == 6
    assert asked == [8, 4, 6, 5]  # the last, then halves: 5 (below the answer) is asked
    assert bisect_first(grid, lambda x: False) is None
    asked.clear()
    assert bisect_first(grid, lambda x: asked.append(x) or True) == 1 and asked == [8, 4, 2, 1]


@pytest.mark.parametrize(("dispatch", "queue"), [("flowserve", "flowserve"), ("flowserve", "fcfs"),
                                                 ("round_robin", "urgency"), ("hexgen_wb", "urgency")])
def test_the_search_finds_the_minimum_scales_of_the_whole_grid(dispatch: str, queue: str):
    """The demo's deadline-aware policies on a small Text-to-SQL run (the demo's cluster)."""
    cluster = load_cluster("hetero-1")
    wl = load_workload("text2sql", {"queries": 24, "rate": 0.5})
    alone = standalone_times(wl, cluster)
    policy = PolicySpec(dispatch, queue)
    assert policy.uses_deadline()
    searched, few = evaluate(cluster, wl, policy, DEFAULT_SLO_SCALES, alone)
    full, every = evaluate(cluster, wl, policy, DEFAULT_SLO_SCALES, alone, search=False)
    assert len(every) == len(DEFAULT_SLO_SCALES) and len(few) <= 9
    assert searched["min_slo_scale"] == full["min_slo_scale"]
    assert searched["latency_s"] == full["latency_s"] and searched["throughput_qps"] == full["throughput_qps"]
    points = {p["scale"]: p["attainment"] for p in full["slo_attainment"]}
    assert all(points[p["scale"]] == p["attainment"] for p in searched["slo_attainment"])
