"""The latency predictor's features of a call on an instance, and what a finished call teaches."""

from __future__ import annotations

import pytest
from helpers import ScriptProgram, call_state, ref_of

from flowserve.core.harness import PolicyHarness
from flowserve.core.state import InstanceState, QueryState
from flowserve.graph.runtime import QueryRun
from flowserve.policies.fcfs import FCFS
from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.slo.features import FEATURES, analytic_latency, call_features, observed_latency
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.events import CallFinished
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query

A100, L4 = cost_model_for("A100-80G", "llama-3.1-8b"), cost_model_for("L4", "llama-3.1-8b")


def call(cid: int, prompt: tuple[int, ...], out: int):
    qs = QueryState(Query(cid, 0.0, "w", ref_of(ScriptProgram([]))), QueryRun(ScriptProgram([]), cid))
    return call_state(LLMCall(cid, cid, "n", "s", "w", prompt, out, out), qs)


def instance(name: str, gpu: str, cost) -> InstanceState:
    return InstanceState(InstanceSpec(name, gpu, "llama-3.1-8b"), cost, FCFS())


def test_an_idle_instance_shows_only_the_calls_own_work_in_its_own_hardware_seconds() -> None:
    a, b = instance("a", "A100-80G", A100), instance("b", "L4", L4)
    view = PolicyHarness([a, b]).view
    cs = call_state(LLMCall(1, 1, "n", "s", "w", tuple(range(1000)), 100, 100))
    fa, fb = call_features(cs, a, view), call_features(cs, b, view)
    assert len(fa) == len(FEATURES)
    own_ctx = 1000 + 100 / 2
    assert fa == pytest.approx((0.0, 0.0, 0.0, A100.prefill_time(1000, 0), A100.decode_step_time(1, own_ctx), 0, 0))
    assert fb[3] == pytest.approx(L4.prefill_time(1000, 0)) and fb[3] > fa[3]  # the slower GPU: larger seconds
    assert analytic_latency(fa) == pytest.approx((fa[3], fa[4]))


def test_queued_and_running_calls_show_as_work_ahead_and_a_bigger_batch() -> None:
    a = instance("a", "A100-80G", A100)
    h = PolicyHarness([a])
    first = call(1, tuple(range(500)), 50)
    first.t_comp = A100.call_time(500, 50)
    h.enqueue(first, a)
    h.release(first, a)
    waiting = call(2, tuple(range(900, 1700)), 50)
    waiting.t_comp = A100.call_time(800, 50)
    h.enqueue(waiting, a)
    cs = call(3, tuple(range(2000, 2400)), 10)
    x = call_features(cs, a, h.view)
    assert x[5] == 1 and x[6] == 1  # one running, one queued ahead
    assert x[0] == pytest.approx(waiting.t_comp)  # FCFS counts a queued call's whole work as its prefill
    assert x[1] == pytest.approx(first.t_comp * occupancy(a)) and x[2] == 0.0  # no batch limit: no slot wait
    # it decodes beside the running call and the queued one: a batch of 3, its context scaled alike
    assert x[4] == pytest.approx(A100.decode_step_time(3, ((500 + 25) + (400 + 5)) * 3 / 2))


def test_observed_latency_from_the_decision_and_the_engines_report() -> None:
    seen = observed_latency(CallFinished(3.0, 1, "a", output_tokens=5, first_token=1.0), decided=0.5)
    assert seen.ttft_s == pytest.approx(0.5) and seen.tpot_s == pytest.approx(0.5)  # (3 − 1) / (5 − 1)
    one = observed_latency(CallFinished(2.0, 1, "a", output_tokens=1, first_token=2.0), decided=0.0)
    assert one.ttft_s == 2.0 and one.tpot_s is None
    assert observed_latency(CallFinished(2.0, 1, "a", output_tokens=3), 0.0).ttft_s is None
