"""Online α tuning (Hexgen §4.3), driven only by the events the scheduler core sees.

Windows of `window_s` seconds close on `Tick` events (the policy asks for one every
`window_s`; a window closes at the first Tick at least window_s/2 after it opened, so
the first window, opened by the first event, ends at the first Tick). The first window runs with α = 0
while its trace is recorded; at its close the tuner asks the driver to run the sweep
(`RunJob("alpha_sweep", (SweepJob,))`: replay the window in the simulator, with the
cluster's own instance specs and cost models from the view) and adopts the answer on
`JobFinished`, announcing it with `PolicyChanged`. At each later close it compares the
latencies of the queries that completed in this window with the previous window's by a
one-sided Welch t-test; p < p_value re-tunes on this window's trace. The simulator runs
the job at once; a live gateway runs it in a worker and keeps serving meanwhile (a
window closing while a job runs does not start another).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowserve.core.view import ClusterView
from flowserve.policies.registry import PolicyRef, policy_name
from flowserve.tune.job import ALPHA_SWEEP, SweepJob, latency_regressed
from flowserve.tune.recorder import TraceRecorder
from flowserve.types.commands import Command, PolicyChanged, RunJob
from flowserve.types.events import Event, JobFinished, Tick


@dataclass(frozen=True)
class TuneEvent:
    """One tuning decision, for reports."""

    time: float  # when the job was requested
    reason: str  # "initial" or "regression (p=…)"
    window: tuple[float, float]
    queries: int
    unfinished: int  # of them, completed from expectations


class OnlineAlphaTuner:
    def __init__(self, window_s: float = 100.0, p_value: float = 0.01, queue: str = "fcfs",
                 queue_params: Mapping[str, Any] | None = None) -> None:
        """queue, queue_params: the queue policy the sweep replays the windows with (the
        cluster's own, by name or import path)."""
        assert window_s > 0 and 0 < p_value < 1
        self.window_s = window_s
        self.p_value = p_value
        self.queue = queue
        self.queue_params = dict(queue_params or {})
        self.recorder = TraceRecorder()
        self._start: float | None = None
        self._done: list[tuple[float, float]] = []  # (finish time, latency), not yet windowed
        self._prev: list[float] | None = None
        self._tuned = False
        self._job: tuple[int, TuneEvent] | None = None
        self._ids = itertools.count(1)
        self.requests: list[TuneEvent] = []
        self.tests: list[tuple[float, float]] = []  # (window end, p-value) of each t-test

    def observe(self, event: Event, view: ClusterView, policy: Any) -> tuple[Sequence[Command], float | None]:
        """Returns the commands to issue and the α to adopt now (None: keep the current)."""
        if self._start is None:
            self._start = event.time
        self._done.extend(self.recorder.observe(event, view))
        if isinstance(event, Tick) and event.time >= self._start + self.window_s / 2:
            return self._close_window(event.time, view, policy), None
        if isinstance(event, JobFinished) and self._job is not None and event.job_id == self._job[0]:
            return self._adopt(event, policy)
        return (), None

    def _close_window(self, now: float, view: ClusterView, policy: Any) -> list[Command]:
        start = self._start
        assert start is not None
        latencies = [lat for t, lat in self._done if t < now]
        self._done = [(t, lat) for t, lat in self._done if t >= now]
        reason = None
        if not self._tuned:
            reason = "initial"
        elif self._prev is not None:
            regressed, p = latency_regressed(latencies, self._prev, self.p_value)
            self.tests.append((now, p))
            if regressed:
                reason = f"regression (p={p:.2g})"
        commands: list[Command] = []
        if reason is not None and self._job is None:
            commands = self._request(reason, start, now, view, policy)
        if latencies:
            self._prev = latencies
        self.recorder.forget(before=now)
        self._start = now
        return commands

    def _request(self, reason: str, start: float, end: float, view: ClusterView, policy: Any) -> list[Command]:
        trace = self.recorder.replay_trace(start, end, view)
        up = [inst for inst in view.instances.values() if inst.up]
        if trace is None or not up:
            return []  # nothing arrived (or nothing to replay it on): try at the next window
        job = SweepJob(trace.workload, tuple(i.spec for i in up), {i.name: i.cost for i in up},
                       trace.deadlines, self.queue, dict(self.queue_params), policy.beta)
        ev = TuneEvent(end, reason, (start, end), len(trace.workload.queries), trace.unfinished)
        self._job = (next(self._ids), ev)
        self.requests.append(ev)
        return [RunJob(self._job[0], ALPHA_SWEEP, (job,))]

    def _adopt(self, event: JobFinished, policy: Any) -> tuple[Sequence[Command], float | None]:
        assert self._job is not None
        ev = self._job[1]
        self._job = None
        info: dict[str, Any] = {"reason": ev.reason, "window": list(ev.window), "queries": ev.queries,
                                "unfinished": ev.unfinished}
        if event.error is not None or event.result is None:
            info.update(alpha=policy.alpha, error=event.error or "no result")
            return [PolicyChanged(event.time, "hexgen_wb", info)], None
        result = event.result
        self._tuned = True
        info.update(alpha=result.alpha, previous=policy.alpha,
                    mean_latency={str(a): v for a, v in result.mean_latency.items()})
        return [PolicyChanged(event.time, "hexgen_wb", info)], result.alpha


@dataclass(frozen=True)
class TuningServices:
    """The services both drivers hand their core for its policies (`DriverServices`): an
    online α tuner sweeping with the cluster's queue policy (policies never import the
    simulator the tuner replays in)."""

    queue: PolicyRef = "fcfs"
    queue_params: Mapping[str, Any] = field(default_factory=dict)

    def alpha_tuner(self, window_s: float, p_value: float) -> OnlineAlphaTuner:
        return OnlineAlphaTuner(window_s, p_value, policy_name(self.queue), self.queue_params)
