"""Registered workflows (Text-to-SQL over SQLite) and the generic hooks a tuning policy
uses live: Tick, RunJob → JobFinished, PolicyChanged."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from live_support import MODEL, ScriptedBackend, ext_spec, run, scripted_driver, sim_spec, single

from flowserve.apps.text2sql import TEXT2SQL
from flowserve.core.view import ClusterView
from flowserve.errors import RequestError
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.settings import GatewaySettings
from flowserve.policies import DISPATCH_POLICIES
from flowserve.policies.dispatch import RoundRobin
from flowserve.sim.tokenizer import word_ids
from flowserve.types import Command, Event, InstanceSpec, JobFinished, LLMCall, PolicyChanged, RunJob, Tick


@pytest.fixture(scope="module")
def t2s() -> dict:
    prepared = TEXT2SQL.prepare({"max_rounds": 2})
    yield prepared
    import shutil

    for path in prepared["_cleanup"]:
        shutil.rmtree(path, ignore_errors=True)


def contains(seq: Sequence[int], sub: Sequence[int]) -> bool:
    n = len(sub)
    return any(tuple(seq[i:i + n]) == tuple(sub) for i in range(len(seq) - n + 1))


def sql_answers(by_node: dict[str, str]):
    def answer(call: LLMCall) -> str:
        return by_node[call.node]
    return answer


def test_revise_rounds_are_driven_by_real_sql_errors(t2s: dict) -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"), sql_answers({
            "cand0": "SELECT * FROM clients;", "cand1": "I think the answer is four.",
            "rev1": "```sql\nSELECT COUNT(*) FROM client WHERE gender = 'F'\n```"}))
        d = scripted_driver({"a": a})
        await d.start()
        try:
            program = TEXT2SQL.build({"question": "How many female clients?"}, t2s, None)
            r = await d.run("text2sql", program)
        finally:
            await d.shutdown()
        assert r.status == "completed"
        out = r.output
        assert out["status"] == "ok" and out["revise_rounds"] == 1 and out["llm_calls"] == 3
        assert out["sql"] == "SELECT COUNT(*) FROM client WHERE gender = 'F'"
        assert out["columns"] == ["COUNT(*)"] and isinstance(out["rows"][0][0], int)
        revise = next(c for c in a.calls if c.node == "rev1")
        # the scripted engine has no tokenizer: the gateway's word tokenizer stands in
        assert contains(revise.prompt, word_ids(" such table: clients"))
        assert contains(revise.prompt, word_ids(" FROM clients;"))
        # every prompt begins with the schema: one long shared prefix
        cand = next(c for c in a.calls if c.node == "cand0")
        shared = next(i for i, (x, y) in enumerate(zip(cand.prompt, revise.prompt, strict=False)) if x != y)
        assert shared > 200

    run(body())


def test_a_candidate_that_runs_ends_the_query_without_revisions(t2s: dict) -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"), sql_answers({"cand0": "SELECT 1", "cand1": "SELECT 2"}))
        d = scripted_driver({"a": a})
        await d.start()
        try:
            r = await d.run("text2sql", TEXT2SQL.build({"question": "One?"}, t2s, None))
        finally:
            await d.shutdown()
        assert r.output["status"] == "ok" and r.output["revise_rounds"] == 0 and len(a.calls) == 2
        assert r.output["rows"] in ([[1]], [[2]])

    run(body())


def test_revisions_stop_at_the_cap_with_the_last_sql_error(t2s: dict) -> None:
    async def body() -> None:
        d = LiveDriver([sim_spec("a")], GatewaySettings(time_scale=200.0))
        await d.start()
        try:
            r = await d.run("text2sql", TEXT2SQL.build({"question": "Total loans?", "candidates": 1}, t2s, None))
        finally:
            await d.shutdown()
        out = r.output
        assert r.status == "completed" and out["status"] == "unresolved"
        assert out["revise_rounds"] == 2 and out["llm_calls"] == 3 and len(r.calls) == 3
        assert "syntax error" in out["error"]  # SQLite's own message about the placeholder text

    run(body())


def test_bad_workflow_inputs_are_request_errors(t2s: dict) -> None:
    with pytest.raises(RequestError, match="question"):
        TEXT2SQL.build({}, t2s, None)
    with pytest.raises(RequestError, match="unknown database 'hr'"):
        TEXT2SQL.build({"question": "q", "database": "hr"}, t2s, None)
    with pytest.raises(RequestError, match="candidates"):
        TEXT2SQL.build({"question": "q", "candidates": 0}, t2s, None)
    assert TEXT2SQL.build({"question": "q", "candidates": 9}, t2s, None).candidates == 2  # capped by config


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
        d = LiveDriver([sim_spec("a")], GatewaySettings(dispatch=JobPolicy.name, jobs=jobs), jobs=JOBS)
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
        assert d.core.dispatch.ticks >= 1

    run(body())


def test_a_failing_job_is_reported_to_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DISPATCH_POLICIES, BrokenJobPolicy.name, BrokenJobPolicy)

    async def body() -> None:
        d = LiveDriver([sim_spec("a")], GatewaySettings(dispatch=BrokenJobPolicy.name, jobs="thread"), jobs=JOBS)
        await d.start()
        policy = d.core.dispatch
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
        d = LiveDriver([sim_spec("a")], GatewaySettings(dispatch=JobPolicy.name, jobs="thread"), jobs={})
        await d.start()
        policy = d.core.dispatch
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
        d = LiveDriver([sim_spec("a"), b], settings)
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
        assert d.core.dispatch.alpha == change.params["alpha"]
        assert d.metrics.policy_param.labels("hexgen_wb", "alpha")._value.get() == change.params["alpha"]
        assert d.metrics.jobs.labels("done")._value.get() >= 1

    run(body())
