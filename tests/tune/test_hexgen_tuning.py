"""Trace recorder, α sweep, Welch test and the online α tuner (Hexgen §4.3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flowserve.config import load_cluster
from flowserve.graph.prompt import Lit, Segment, Toks
from flowserve.policies.hexgen import HexgenWB
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.tokenize.words import word_ids
from flowserve.tune import alpha as alpha_mod
from flowserve.tune.alpha import JOBS, best_alpha, coarse_to_fine, mean_latency, sweep_alpha
from flowserve.tune.job import ALPHA_SWEEP, COARSE, SweepJob, latency_regressed
from flowserve.tune.recorder import TraceRecorder
from flowserve.tune.segments import BlockIds, prompt_segments
from flowserve.workloads import load_workload

CLUSTER = load_cluster("hetero-1")


def small_workload(n: int = 24, rate: float = 1.0, seed: int = 3):
    return load_workload("text2sql-mixed", {"queries": n, "rate": rate, "seed": seed})


# --------------------------------------------------------------------------- recorder


def test_segment_prompts_record_as_their_segments_and_text_as_chained_blocks():
    cases = [(Segment(7, 1),), (Segment(3, 500), Segment(100001, 1), Segment(9, 40)),
             (Segment(5, 2), Segment(5, 2), Segment(6, 1000)), (Segment(1, 7000), Segment(2, 3))]
    for segs in cases:
        assert prompt_segments(segs, BlockIds()) == segs
    ids = BlockIds()
    a = prompt_segments((Segment(1, 10), Lit("the same words " * 40), Toks((5, 6))), ids)
    b = prompt_segments((Segment(1, 10), Lit("the same words " * 40), Toks((7,))), ids)
    assert a[:2] == b[:2] and a[0] == Segment(1, 10)  # shared text: shared block ids
    assert sum(s.length for s in a) == 10 + len(word_ids("the same words " * 40)) + 2


def test_real_token_prompts_share_block_ids_exactly_as_far_as_they_match():
    ids = BlockIds()
    base = tuple(range(1000, 1130))
    a = prompt_segments((Toks(base + (1, 2, 3)),), ids)
    b = prompt_segments((Toks(base[:100] + (7,) * 60),), ids)
    assert sum(s.length for s in a) == 133 and sum(s.length for s in b) == 160
    assert a[0] == b[0]  # first 64-token block identical
    assert a[1].id != b[1].id  # second block differs at token 100
    assert prompt_segments((), ids)[0].length == 1


class Recording(HexgenWB):
    """hexgen_wb with a recorder attached (no tuning): what the online tuner sees."""

    def __init__(self, alpha: float) -> None:
        super().__init__(alpha=alpha)
        self.recorder = TraceRecorder()
        self.view = None
        self.completed: list[tuple[float, float]] = []
        self.cut = None

    def observe(self, event, view):
        self.view = view
        self.completed += self.recorder.observe(event, view)
        if self.cut is None and event.time >= 20.0:  # a mid-run cut, like a window's end
            self.cut = self.recorder.replay_trace(0.0, 20.0, view)
        return ()


def test_recorded_trace_replays_the_run_exactly():
    wl = small_workload()
    alone = standalone_times(wl, CLUSTER)
    rec = Recording(alpha=0.3)
    run = simulate(CLUSTER, wl, PolicySpec("hexgen_wb", "urgency"), 3.0, alone, dispatch=rec)
    trace = rec.recorder.replay_trace(0.0, 1e9, rec.view)
    assert trace.unfinished == 0 and len(trace.workload.queries) == len(wl.queries)
    assert trace.workload.calls == wl.calls
    for orig, got in zip(wl.queries, trace.workload.queries, strict=True):
        assert orig.arrival == got.arrival
        assert [[getattr(x, "prompt", None) for x in st] for st in orig.plan.steps] == \
               [[getattr(x, "prompt", None) for x in st] for st in got.plan.steps]
    # the recorder saw every completion with its latency
    assert sorted(lat for _, lat in rec.completed) == pytest.approx(sorted(q.latency for q in run.queries))
    # replayed with the original priors and deadlines, the simulation is the same
    replay = dataclasses.replace(trace.workload, output_priors=wl.output_priors)
    again = simulate(CLUSTER, replay, PolicySpec("hexgen_wb", "urgency", {"alpha": 0.3}), None, alone,
                     deadlines=trace.deadlines)
    assert {q.id: q.latency for q in again.queries} == pytest.approx({q.id: q.latency for q in run.queries})


def test_a_mid_run_cut_completes_unfinished_queries_from_expectations():
    wl = small_workload(rate=2.0)
    rec = Recording(alpha=0.0)
    simulate(CLUSTER, wl, PolicySpec("hexgen_wb", "fcfs"), None, dispatch=rec)
    cut = rec.cut
    arrived = [q for q in wl.queries if q.arrival < 20.0]
    assert cut is not None and len(cut.workload.queries) == len(arrived)
    assert cut.unfinished > 0
    for orig, got in zip(arrived, cut.workload.queries, strict=True):
        assert got.plan.steps and all(got.plan.steps)
        # issued work is kept as issued; expectations add at least the unit tests still to come
        assert got.plan.steps[0][0].prompt == orig.plan.steps[0][0].prompt
        assert len(got.plan.calls()) >= 10
    assert cut.deadlines == tuple(None for _ in arrived)  # the run had no deadlines


# --------------------------------------------------------------------------- sweep


@pytest.mark.parametrize("best", [0.0, 0.3, 0.7, 1.0])
def test_coarse_to_fine_finds_the_minimum_of_unimodal_objectives(best):
    seen = coarse_to_fine(lambda a: (a - best) ** 2)
    assert best_alpha(seen) == pytest.approx(best)
    assert len(seen) <= len(COARSE) + 2  # coarse grid plus at most two refinements


@pytest.mark.parametrize("coarse", [COARSE, (0.0, 0.2, 0.4, 0.6, 0.8)])
def test_sweep_is_near_what_a_brute_force_sweep_picks_on_a_small_trace(coarse):
    """The coarse-to-fine sweep lands within 2% of the brute-force optimum with fewer
    simulations, on the standard grid and on a grid without α = 1 (where the refinement
    does the work); the objective is flat near its optimum, so exact ties are luck."""
    wl = small_workload(n=20, rate=1.5, seed=2)
    alone = standalone_times(wl, CLUSTER)
    job = SweepJob(wl, CLUSTER, None, tuple(4.0 * s for s in alone), beta=500.0, coarse=coarse)
    top = min(round(max(coarse) * 10) + 1, 10)  # the refinement may step 0.1 past the grid
    brute = {a / 10: mean_latency(job, a / 10, alone) for a in range(top + 1)}
    result = sweep_alpha(job)
    assert result.alpha == best_alpha(result.mean_latency)
    assert brute[round(result.alpha, 1)] <= 1.02 * min(brute.values())
    for a, lat in result.mean_latency.items():
        assert lat == pytest.approx(brute[round(a, 1)])  # same simulations, same numbers
    assert len(result.mean_latency) <= len(coarse) + 2 < len(brute) + 2


def test_welch_test_fires_on_a_regression_and_not_on_noise():
    rng = np.random.default_rng(0)
    ref = rng.normal(100.0, 15.0, 60)
    noise = rng.normal(100.0, 15.0, 60)
    slower = rng.normal(115.0, 15.0, 60)
    faster = rng.normal(80.0, 15.0, 60)
    assert latency_regressed(slower, ref)[0]
    assert not latency_regressed(noise, ref)[0]
    assert not latency_regressed(faster, ref)[0]  # one-sided: an improvement is no regression
    assert latency_regressed([1.0], ref) == (False, 1.0)  # too few samples
    assert latency_regressed([5.0, 5.0], [5.0, 5.0]) == (False, 1.0)  # no variance: no evidence


# --------------------------------------------------------------------------- online tuner


def _jumping_workload():
    """0.2 q/s for 40 s, then 2 q/s for 120 s: latencies regress while queries still arrive
    (a retune needs arrivals in the window to replay)."""
    quiet = load_workload("text2sql-mixed", {"queries": 10, "rate": 0.2, "seed": 2})
    busy = load_workload("text2sql-mixed", {"queries": 240, "rate": 2.0, "seed": 4})
    queries = [q for q in quiet.queries if q.arrival < 40.0]
    queries += [dataclasses.replace(q, id=1000 + q.id, arrival=40.0 + q.arrival) for q in busy.queries]
    return dataclasses.replace(quiet, queries=tuple(queries))


def test_online_tuner_tunes_after_the_first_window_and_retunes_on_regression():
    wl = _jumping_workload()
    policy = PolicySpec("hexgen_wb", "urgency", {"alpha_tuning": True, "window_s": 40.0})
    res = simulate(CLUSTER, wl, policy, 6.0, jobs=JOBS)
    changes = res.policy_changes
    assert all(q.failed is None for q in res.queries)
    assert changes and changes[0].params["reason"] == "initial"
    assert changes[0].time == pytest.approx(40.0)
    assert changes[0].params["previous"] == 0.0
    first = changes[0].params
    assert first["alpha"] == best_alpha({float(a): v for a, v in first["mean_latency"].items()})
    retunes = [c for c in changes[1:] if c.params["reason"].startswith("regression")]
    assert retunes and all(c.time > 40.0 for c in retunes)  # only after the load jumped


def test_online_tuner_stays_put_on_a_steady_workload():
    wl = load_workload("text2sql-mixed", {"queries": 30, "rate": 0.2, "seed": 1})
    res = simulate(CLUSTER, wl, PolicySpec("hexgen_wb", "fcfs", {"alpha_tuning": True, "window_s": 40.0}), jobs=JOBS)
    reasons = [c.params["reason"] for c in res.policy_changes]
    assert reasons == ["initial"]


def test_a_failed_sweep_keeps_alpha_and_is_reported(monkeypatch):
    def broken(job):
        raise RuntimeError("simulator exploded")

    monkeypatch.setitem(alpha_mod.JOBS, ALPHA_SWEEP, broken)
    wl = small_workload(n=12, rate=0.5)
    res = simulate(CLUSTER, wl, PolicySpec("hexgen_wb", "fcfs", {"alpha_tuning": True, "window_s": 10.0}), jobs=JOBS)
    assert res.policy_changes
    assert all("simulator exploded" in c.params["error"] and c.params["alpha"] == 0.0 for c in res.policy_changes)
    assert len(res.queries) == 12 and all(q.failed is None for q in res.queries)
