"""The generic hooks a tuning policy uses live: Tick, RunJob → JobFinished, PolicyChanged
(the Text-to-SQL agent has its own tests: test_text2sql_*.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from live_support import MODEL, run, sim_spec, single

from flowserve.core.view import ClusterView
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.policies import DISPATCH_POLICIES
from flowserve.policies.round_robin import RoundRobin
from flowserve.types.commands import Command, PolicyChanged, RunJob
from flowserve.types.events import Event, JobFinished, Tick
from flowserve.types.specs import InstanceSpec

# --------------------------------------------------------------------------- jobs and ticks


def sweep(n: int) -> float:
    """A pure CPU job, as an α sweep in the simulator would be (module level: picklable)."""
    return sum(range(n)) / 10


def broken(n: int) -> float:
    raise ValueError(f"cannot tune with {n}")


class JobPolicy(RoundRobin):
    """Test-only: on its first tick asks for a job, adopts its result as a parameter."""

    name = "test_job_policy"
    tick_s = 0.01
    job = "sweep"

    def __init__(self) -> None:
        super().__init__()
        self.asked = False
        self.ticks = 0
        self.failures: list[str] = []

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        if isinstance(event, Tick):
            self.ticks += 1
            if not self.asked:
                self.asked = True
                return [RunJob(7, self.job, (5,))]
        if isinstance(event, JobFinished) and event.job_id == 7:
            if event.error is not None:
                self.failures.append(event.error)
                return []
            return [PolicyChanged(event.time, self.name, {"alpha": event.result, "note": "x"})]
        return ()


class BrokenJobPolicy(JobPolicy):
    name = "test_broken_job_policy"
    job = "broken"


JOBS = {"sweep": sweep, "broken": broken}  # the driver's registry: commands name jobs, never carry them


@pytest.mark.parametrize("jobs", ["process", "thread"])
def test_ticks_jobs_and_policy_changes_run_live(monkeypatch: pytest.MonkeyPatch, jobs: str) -> None:
    monkeypatch.setitem(DISPATCH_POLICIES, JobPolicy.name, JobPolicy)

    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(dispatch=JobPolicy.name, jobs=jobs), jobs=JOBS)
        await d.start()
        try:
            await d.until(lambda: bool(d.policy_log), timeout_s=30)
        finally:
            await d.shutdown()
        (change,) = d.policy_log
        assert change.policy == JobPolicy.name and change.params["alpha"] == 1.0
        assert d.metrics.policy_param.labels(JobPolicy.name, "alpha")._value.get() == 1.0
        assert d.metrics.policy_changes.labels(JobPolicy.name)._value.get() == 1
        assert d.metrics.jobs.labels("done")._value.get() == 1
        assert d.dispatch.ticks >= 1

    run(body())


def test_a_failing_job_is_reported_to_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DISPATCH_POLICIES, BrokenJobPolicy.name, BrokenJobPolicy)

    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(dispatch=BrokenJobPolicy.name, jobs="thread"), jobs=JOBS)
        await d.start()
        policy = d.dispatch
        try:
            await d.until(lambda: bool(policy.failures), timeout_s=30)
        finally:
            await d.shutdown()
        assert policy.failures == ["ValueError: cannot tune with 5"] and not d.policy_log
        assert d.metrics.jobs.labels("failed")._value.get() == 1

    run(body())


def test_an_unregistered_job_is_reported_to_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DISPATCH_POLICIES, JobPolicy.name, JobPolicy)

    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(dispatch=JobPolicy.name, jobs="thread"), jobs={})
        await d.start()
        policy = d.dispatch
        try:
            await d.until(lambda: bool(policy.failures), timeout_s=30)
        finally:
            await d.shutdown()
        assert policy.failures == ["no job 'sweep' is registered"]

    run(body())


def test_hexgen_online_alpha_tuning_runs_live() -> None:
    """The Hexgen tuner inside the gateway: it records the live window, the sweep runs in a
    worker process as a RunJob, and the adopted α shows in the policy log and /metrics."""
    async def body() -> None:
        settings = GatewaySettings(dispatch="hexgen_wb", queue="urgency", time_scale=50.0,
                                   dispatch_params={"alpha_tuning": True, "window_s": 0.5}, jobs="process")
        b = InstanceSpec("b", "A6000", MODEL, backend="sim", reports_capacity=True)
        d = compose_driver([sim_spec("a"), b], settings)
        await d.start()
        try:
            for i in range(6):
                await d.run("completion", single([7 + i] * 300 + list(range(40)), max_tokens=8))
            await d.until(lambda: bool(d.policy_log), timeout_s=30)
        finally:
            await d.shutdown()
        change = d.policy_log[0]
        assert change.policy == "hexgen_wb" and change.params["reason"] == "initial"
        assert change.params["previous"] == 0.0 and 0.0 <= change.params["alpha"] <= 1.0
        assert d.dispatch.alpha == change.params["alpha"]
        assert d.metrics.policy_param.labels("hexgen_wb", "alpha")._value.get() == change.params["alpha"]
        assert d.metrics.jobs.labels("done")._value.get() >= 1

    run(body())
