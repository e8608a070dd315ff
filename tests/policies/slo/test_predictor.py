"""The online latency predictor: what it predicts before and after learning, which calls
teach which model, and how it names its models — with a hand-written model, so the core's
tests need no learning library."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, cast

import pytest
from helpers import call_state

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import InstanceState
from flowserve.errors import ConfigError
from flowserve.policies.fcfs import FCFS
from flowserve.policies.slo.features import analytic_latency, call_features
from flowserve.policies.slo.predictor import LatencyPredictor, latency_model_factory
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.events import CallFailed, CallFinished
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall


class MeanModel:
    """Predicts the mean of what it learned (a stand-in with hand-computable answers)."""

    made: ClassVar[list[MeanModel]] = []

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.seen: list[tuple[tuple[float, ...], float, float | None]] = []
        MeanModel.made.append(self)

    @property
    def samples(self) -> int:
        return len(self.seen)

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.seen.append((tuple(x), ttft_s, tpot_s))

    def predict(self, xs: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
        ttft = sum(s[1] for s in self.seen) / len(self.seen)
        tpots = [s[2] for s in self.seen if s[2] is not None]
        return [(ttft, sum(tpots) / len(tpots) if tpots else 0.0)] * len(xs)


def instance(name: str, gpu: str) -> InstanceState:
    return InstanceState(InstanceSpec(name, gpu, "llama-3.1-8b"), cost_model_for(gpu, "llama-3.1-8b"), FCFS())


def call(cid: int, n: int = 400, out: int = 20):
    return call_state(LLMCall(cid, cid, "n", "s", "w", tuple(range(cid * 10_000, cid * 10_000 + n)), out, out))


def setup() -> tuple[PolicyHarness, list[InstanceState]]:
    insts = [instance("a0", "A100-80G"), instance("a1", "A100-80G"), instance("l4", "L4")]
    return PolicyHarness(insts), insts


def test_analytic_predicts_the_cost_models_estimate_and_learns_nothing() -> None:
    h, insts = setup()
    p = LatencyPredictor("analytic")
    cs = call(1)
    assert p.predict(cs, insts, h.view) == [analytic_latency(call_features(cs, i, h.view)) for i in insts]
    p.remember(cs, insts[0], h.view)
    p.learn_from(CallFinished(1.0, 1, "a0", output_tokens=20, first_token=0.5))
    assert p.learned == 0 and not p.ready(insts[0])


def test_a_finished_call_teaches_its_profiles_model_what_the_estimate_missed() -> None:
    MeanModel.made.clear()
    h, (a0, a1, l4) = setup()
    p = LatencyPredictor(cast(str, MeanModel), seed=7, warmup=2)
    for cid, inst in ((1, a0), (2, a1)):  # two A100s: one model between them
        cs = call(cid)
        base = analytic_latency(call_features(cs, inst, h.view))
        p.remember(cs, inst, h.view)
        p.learn_from(CallFinished(2.0, cid, inst.name, output_tokens=21, first_token=0.5 + base[0]))
    [model] = MeanModel.made
    assert model.seed == 7 and model.samples == 2
    tpot = (2.0 - 0.5 - analytic_latency(call_features(call(1), a0, h.view))[0]) / 20
    assert model.seen[0][1] == pytest.approx(0.5)  # TTFT residual: 0.5 s more than the estimate
    assert model.seen[0][2] == pytest.approx(tpot - analytic_latency(call_features(call(1), a0, h.view))[1])
    assert p.ready(a0) and p.ready(a1) and not p.ready(l4)
    cs = call(3)
    [pa0, _pa1, pl4] = p.predict(cs, [a0, a1, l4], h.view)
    base = analytic_latency(call_features(cs, a0, h.view))
    assert pa0[0] == pytest.approx(base[0] + 0.5)  # the estimate plus the learned residual
    assert pl4 == analytic_latency(call_features(cs, l4, h.view))  # its profile has learned nothing: the estimate


def test_stale_failed_and_unknown_reports_teach_nothing() -> None:
    MeanModel.made.clear()
    h, (a0, _, _) = setup()
    p = LatencyPredictor(cast(str, MeanModel), warmup=0)
    for cid in (1, 2):
        p.remember(call(cid), a0, h.view)
    p.learn_from(CallFinished(1.0, 1, "a1", output_tokens=3, first_token=0.5))  # moved meanwhile: not its report
    p.learn_from(CallFailed(1.0, 2, "a0", "boom"))
    p.learn_from(CallFinished(1.0, 2, "a0", output_tokens=3, first_token=0.5))  # forgotten with its failure
    p.learn_from(CallFinished(1.0, 99, "a0", output_tokens=3, first_token=0.5))  # never decided here
    assert p.learned == 0 and not MeanModel.made


def test_a_pool_model_without_a_fallback_says_nothing_until_it_has_learned() -> None:
    h, (a0, _, l4) = setup()
    p = LatencyPredictor(cast(str, MeanModel), warmup=1, group="pool", fallback=None)
    assert p.predict(call(1), [a0, l4], h.view) == [None, None]
    p.remember(call(1), a0, h.view)
    p.learn_from(CallFinished(3.0, 1, "a0", output_tokens=5, first_token=1.0))
    assert p.predict(call(2), [a0, l4], h.view) == [(1.0, 0.5), (1.0, 0.5)]  # one model for every GPU type


def test_model_names() -> None:
    assert latency_model_factory("analytic") is None
    assert latency_model_factory("flowserve.predict.latency_models:SGDLatency").__name__ == "SGDLatency"
    with pytest.raises(ValueError, match="warmup"):
        LatencyPredictor(warmup=-1)
    with pytest.raises(ConfigError, match="unknown latency model 'nope'"):
        latency_model_factory("nope")
    with pytest.raises(ConfigError, match="no_such_module"):
        latency_model_factory("no_such_module:Model")
