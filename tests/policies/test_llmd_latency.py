"""llm-d's predicted-latency scheduling (`llmd_slo`): its features, its default profile while
the predictor learns, its headroom tiers and its shedding — with a hand-written model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, cast

import pytest
from helpers import ScriptProgram, call_state, ref_of

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import InstanceState, QueryState
from flowserve.graph.runtime import QueryRun
from flowserve.policies.fcfs import FCFS
from flowserve.policies.llmd_latency import LLMDPredictedLatency, deficit_blend, llmd_features, normalise
from flowserve.policies.registry import make_dispatch
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.events import CallFinished
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LatencySLO, LLMCall, Query

MODEL = "llama-3.1-8b"


class PerPodModel:
    """Predicts a TTFT and TPOT set per number of running requests (feature 3), as if learned."""

    table: ClassVar[dict[float, tuple[float, float]]] = {}

    def __init__(self, seed: int) -> None:
        self.samples = 0

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.samples += 1

    def predict(self, xs: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
        return [PerPodModel.table[x[3]] for x in xs]


def pods(*running: int) -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [InstanceState(InstanceSpec(f"p{k}", "A100-80G", MODEL), cost_model_for("A100-80G", MODEL), FCFS())
             for k in range(len(running))]
    h = PolicyHarness(insts, prefix_index=PrefixIndex())
    cid = 100
    for inst, n in zip(insts, running, strict=True):
        for _ in range(n):
            cid += 1
            cs = request(cid, LatencySLO(tpot_s=1.0))
            h.enqueue(cs, inst)
            h.release(cs, inst)
    return h, insts


def request(cid: int, slo: LatencySLO | None, priority: int = 0, n: int = 256):
    q = Query(cid, 0.0, "w", ref_of(ScriptProgram([])), None, "default", priority, slo=slo)
    qs = QueryState(q, QueryRun(ScriptProgram([]), cid))
    return call_state(LLMCall(cid, cid, "n", "s", "w", tuple(range(n)), 10, 10), qs)


def trained(**kw) -> LLMDPredictedLatency:
    return LLMDPredictedLatency(model=cast(str, PerPodModel), warmup=0, **kw)


def test_features_are_the_pod_metrics_the_sidecar_reads() -> None:
    h, (p0,) = pods(0)
    h.prefix_index.add(tuple(range(128)), "p0", 0.0)
    x = llmd_features(request(1, None, n=256), p0, h.view)
    assert x == (0.0, 256.0, 0.0, 0.0, 0.5, 128.0)  # 2 of 4 blocks of 64 cached: half the input is uncached


def test_the_default_profile_decides_until_the_predictor_has_learned() -> None:
    h, insts = pods(0, 2)
    policy = LLMDPredictedLatency(model=cast(str, PerPodModel), warmup=1)
    cs = request(1, LatencySLO(ttft_s=1.0, tpot_s=0.1))
    assert policy.choose(cs, insts, h.view) is make_dispatch("llmd").choose(cs, insts, h.view)
    assert policy.stats["default_profile"] == 1
    policy.observe(CallFinished(1.0, 1, policy.choose(cs, insts, h.view).name, output_tokens=3, first_token=0.5),
                   h.view)
    PerPodModel.table = {0.0: (0.1, 0.01), 2.0: (0.2, 0.02)}
    policy.choose(request(2, LatencySLO(ttft_s=1.0, tpot_s=0.1)), insts, h.view)
    assert policy.stats["slo_calls"] == 1


def test_valid_pods_are_drawn_favouring_the_least_headroom() -> None:
    h, insts = pods(0, 1, 2)
    PerPodModel.table = {0.0: (0.1, 0.010), 1.0: (0.5, 0.030), 2.0: (2.0, 0.050)}  # p2 misses the TTFT
    policy = trained(epsilon=0.0, seed=3)
    picks = [policy.choose(request(k, LatencySLO(ttft_s=1.0, tpot_s=0.1)), insts, h.view).name for k in range(400)]
    # positive tier: p0 (headroom 0.9 s / 90 ms) and p1 (0.5 s / 70 ms); "least": weight int((1 − c)·99) + 2,
    # c = 0.8·TTFT + 0.2·TPOT headroom, normalised: p0 c = 1 → 2, p1 c = 0 → 101
    assert "p2" not in picks
    assert picks.count("p1") / len(picks) == pytest.approx(101 / 103, abs=0.03)
    again = trained(epsilon=0.0, seed=3)
    assert picks == [again.choose(request(k, LatencySLO(ttft_s=1.0, tpot_s=0.1)), insts, h.view).name
                     for k in range(400)]  # seeded: the same draws


def test_a_sheddable_request_is_shed_only_when_no_pod_is_valid_and_every_pod_is_busy() -> None:
    h, insts = pods(1, 2)
    PerPodModel.table = {1.0: (2.0, 0.05), 2.0: (3.0, 0.05)}
    policy = trained()
    late = request(1, LatencySLO(ttft_s=1.0, tpot_s=0.1), priority=-1)
    assert policy.shed(late, insts, h.view) is not None
    PerPodModel.table = {1.0: (0.5, 0.05), 2.0: (3.0, 0.05)}
    assert policy.shed(request(2, LatencySLO(ttft_s=1.0, tpot_s=0.1), priority=-1), insts, h.view) is None
    h2, idle = pods(0, 2)
    PerPodModel.table = {0.0: (2.0, 0.05), 2.0: (3.0, 0.05)}
    assert policy.shed(request(3, LatencySLO(ttft_s=1.0, tpot_s=0.1), priority=-1), idle, h2.view) is None


def test_the_tpot_bound_is_the_smallest_running_requests() -> None:
    h, insts = pods(1, 0)  # p0 runs a request whose TPOT objective is 1 s (see `pods`)
    policy = trained(epsilon=0.0)
    # a request asking 2 s per token is held to p0's running request's 1 s there: a predicted 1.5 s fits p1 only
    PerPodModel.table = {1.0: (0.1, 1.5), 0.0: (0.1, 1.5)}
    assert {policy.choose(request(k, LatencySLO(ttft_s=1.0, tpot_s=2.0)), insts, h.view).name
            for k in range(50)} == {"p1"}


def test_normalisation_and_the_deficit_blend_by_hand() -> None:
    assert normalise([1.0, 3.0, 2.0]) == [0.0, 1.0, 0.5]
    assert normalise([2.0, 2.0]) == [0.5, 0.5]
    rows = [(None, -1.0, -0.2, 0.0), (None, -3.0, -0.1, 0.0)]
    # TTFT deficits 1, 3 → 0, 1; TPOT deficits 0.2, 0.1 → 1, 0: 0.8·0 + 0.2·1, 0.8·1 + 0.2·0
    assert deficit_blend(rows) == pytest.approx([0.2, 0.8])  # type: ignore[arg-type]
