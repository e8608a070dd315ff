"""`flowserve_slo`: calls with TTFT/TPOT objectives go where they are predicted to be met,
and the core sheds the sheddable ones no instance would serve in time."""

from __future__ import annotations

import pytest
from helpers import TEST_WORKFLOWS, ScriptedDriver, ScriptProgram, call_state, llm, ref_of

from flowserve.core.harness import PolicyHarness
from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import InstanceState, QueryState
from flowserve.errors import ConfigError, FailureKind
from flowserve.graph.runtime import QueryRun
from flowserve.policies import make_dispatch, queue_factory
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.slo.dispatch import SLOAwareDispatch
from flowserve.profiles.cost_model import cost_model_for
from flowserve.profiles.instance import instance_profile
from flowserve.types.commands import QueryFailed, SendCall
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LatencySLO, LLMCall, Query

MODEL = "llama-3.1-8b"


def instance(name: str, gpu: str) -> InstanceState:
    return InstanceState(InstanceSpec(name, gpu, MODEL), cost_model_for(gpu, MODEL), FlowserveQueue())


def slo_call(cid: int, slo: LatencySLO | None, priority: int = 0, n: int = 600, out: int = 100):
    q = Query(cid, 0.0, "w", ref_of(ScriptProgram([])), None, "default", priority, slo=slo)
    qs = QueryState(q, QueryRun(ScriptProgram([]), cid))
    return call_state(LLMCall(cid, cid, "n", "s", "w", tuple(range(cid * 10_000, cid * 10_000 + n)), out, out), qs)


def busy_h100_and_idle_l4() -> tuple[PolicyHarness, InstanceState, InstanceState]:
    """An H100 running 40 calls with 100 more queued, and an idle L4: the base policy sends a
    new call to the L4."""
    h100, l4 = instance("h100", "H100"), instance("l4", "L4")
    h = PolicyHarness([h100, l4])
    for cid in range(1, 141):
        cs = slo_call(cid, None, n=4000, out=400)
        cs.t_comp = h100.cost.call_time(4000, 400)
        h.enqueue(cs, h100)
        if cid <= 40:
            h.release(cs, h100)
    return h, h100, l4


def test_a_tight_tpot_keeps_the_call_off_the_slow_gpu_the_base_policy_prefers() -> None:
    h, h100, l4 = busy_h100_and_idle_l4()
    free = slo_call(1000, None)
    assert make_dispatch("flowserve").choose(free, [h100, l4], h.view) is l4
    assert SLOAwareDispatch(model="analytic").choose(free, [h100, l4], h.view) is l4  # no objectives: the base's
    # one L4 decode step is ~75 ms; the H100's, in a batch of its 140 calls, ~42 ms: a 60 ms TPOT
    # objective is met only on the H100
    tight = slo_call(1001, LatencySLO(ttft_s=60.0, tpot_s=0.060))
    policy = SLOAwareDispatch(model="analytic")
    assert policy.choose(tight, [h100, l4], h.view) is h100
    assert policy.stats["predicted_met"] == 1
    relaxed = slo_call(1002, LatencySLO(ttft_s=60.0, tpot_s=0.5))
    assert policy.choose(relaxed, [h100, l4], h.view) is l4  # both meet it: the base policy decides


def test_with_no_instance_in_time_the_least_violation_wins_and_only_the_sheddable_are_refused() -> None:
    h, h100, l4 = busy_h100_and_idle_l4()
    impossible = slo_call(1001, LatencySLO(ttft_s=1e-4, tpot_s=1e-4))
    policy = SLOAwareDispatch(model="analytic")
    reason = policy.shed(impossible, [h100, l4], h.view)
    assert reason is not None and "TTFT ≤ 0.1 ms, TPOT ≤ 0.1 ms" in reason
    chosen = policy.choose(impossible, [h100, l4], h.view)
    loads = policy.loads(impossible, [h100, l4], h.view, impossible.query.query.slo)
    assert chosen is (h100, l4)[loads.index(min(loads))]
    assert SLOAwareDispatch(model="analytic", shed=False).shed(impossible, [h100, l4], h.view) is None
    assert policy.shed(slo_call(1002, LatencySLO(ttft_s=600.0)), [h100, l4], h.view) is None


def test_the_core_sheds_a_sheddable_call_and_queues_the_others() -> None:
    core = SchedulerCore([InstanceSpec("a", "A100-80G", MODEL, max_inflight=4, backend="openai")],
                         SLOAwareDispatch(model="analytic"), queue_factory("fcfs"), instance_profile,
                         workflows=TEST_WORKFLOWS)
    d = ScriptedDriver(core)
    prog = ScriptProgram([llm("A", n=2000)])
    impossible = LatencySLO(ttft_s=1e-4)
    sheddable = Query(1, 0.0, "wf", ref_of(prog), priority=-1, slo=impossible)
    kept = Query(2, 0.0, "wf", ref_of(prog), priority=0, slo=impossible)
    d.arrive(sheddable)
    assert isinstance(d.ended[1], QueryFailed) and d.ended[1].kind is FailureKind.SHED
    assert "no instance is predicted to meet" in d.ended[1].reason
    d.arrive(kept)
    assert [c.call.query_id for c in d.commands if isinstance(c, SendCall)] == [2]
    d.run_all()
    assert not isinstance(d.ended[2], QueryFailed)


def test_parameters_are_checked() -> None:
    assert make_dispatch("flowserve_slo", {"model": "analytic", "margin": "0.8"}).margin == 0.8
    with pytest.raises(ConfigError, match="margin"):
        make_dispatch("flowserve_slo", {"margin": "0"})
    with pytest.raises(ConfigError, match="base"):
        make_dispatch("flowserve_slo", {"base": "nope"})
