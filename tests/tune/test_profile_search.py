"""`flowserve tune`'s search end to end on a small trace: the budget spent, one seed one
result (in rounds across processes), the guard that keeps the default, and the report."""

from __future__ import annotations

import dataclasses

import pytest

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.policies.registry import profile_of
from flowserve.sim.run import PolicySpec
from flowserve.tune.profile_search import FINALISTS, TuneRequest, tune_profile
from flowserve.workloads import load_workload

CLUSTER = load_cluster("preble-a6000")
WORKLOAD = load_workload("tool_use", {"queries": 24, "rate": 8.0, "seed": 43})


def request(**kw) -> TuneRequest:
    return TuneRequest(WORKLOAD, CLUSTER, profile_of("flowserve"), **{"budget": 4, "seed": 5, "jobs": 1, **kw})


def test_the_search_spends_its_budget_then_validates_and_reports() -> None:
    lines: list[str] = []
    report = tune_profile(request(peers={"round_robin": PolicySpec("round_robin", "fcfs")}), lines.append)
    trial_lines = [line for line in lines if line.startswith("trial ")]
    assert len(trial_lines) == 4 and "the profile as given" in trial_lines[0]
    assert report.splits == {"fit": 8, "validation": 4, "test": 12}  # 12 first: 70% of them, 30%
    finalists = report.simulations - 4 - 1 - 1 - 1 - (1 if report.tuned else 0)  # trials, default ×2, peer
    assert 0 <= finalists <= FINALISTS
    assert set(report.peers_test) == {"round_robin"}
    if report.tuned:
        assert report.best_validation < report.default_validation * 0.99
        assert report.profile.name == "flowserve-tuned"


def test_one_seed_one_result_across_processes() -> None:
    a = tune_profile(request(jobs=2))
    b = tune_profile(request(jobs=2))
    assert a.describe() == b.describe()


def test_the_guard_keeps_the_default_when_nothing_beats_it_by_min_gain() -> None:
    report = tune_profile(request(min_gain=0.99))  # a tuned profile would need a 100× lower latency
    assert not report.tuned
    assert report.profile == profile_of("flowserve")
    assert report.tuned_test == report.default_test and report.gain == 1.0


@pytest.mark.parametrize(("change", "message"), [
    ({"budget": 0}, "--budget: expected 1 to 10,000 simulations, got 0"),
    ({"jobs": 0}, "--jobs: expected 1 to 64"),
    ({"slo_scale": -1.0}, "--slo-scale: expected a positive number"),
    ({"min_gain": 1.0}, r"--min-gain: expected a share in \[0, 1\)"),
    ({"scorers": ("nope",)}, "--scorer: unknown scorer 'nope'"),
    ({"knobs": ("finish.nope",)}, "--knob: the profile has no knob 'finish.nope'"),
])
def test_bad_requests_are_precise_errors(change, message) -> None:
    with pytest.raises(ConfigError, match=message):
        tune_profile(dataclasses.replace(request(), **change))
