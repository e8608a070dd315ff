"""Events are plain data: a stream recorded from a simulated run replays into fresh cores
and gives exactly the commands the run got — twice, from the same event objects, because
no event carries a live workflow (the core builds each query's own from its ref)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import flowserve.sim.run as sim_run
from flowserve.config import BUILTIN_CLUSTERS
from flowserve.core.scheduler import SchedulerCore
from flowserve.policies import make_dispatch
from flowserve.profiles.predictor import OutputPredictor
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.events import Event, QueryArrived
from flowserve.workloads import load_workload


class Recording(SchedulerCore):
    """The simulator's core, keeping every event it handled and the commands it answered."""

    made: ClassVar[list[Recording]] = []

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.args, self.kw = args, kw
        self.log: list[tuple[Event, list]] = []
        Recording.made.append(self)

    def handle(self, event: Event) -> list:
        out = super().handle(event)
        self.log.append((event, list(out)))
        return out


@pytest.mark.parametrize(("cluster", "workload", "dispatch", "queue"), [
    ("hetero-1", {"kind": "text2sql", "trace": "mixed", "rate": 1.0, "queries": 6}, "flowserve", "flowserve"),
    ("teola", {"kind": "naive_rag", "rate": 0.5, "queries": 3}, "least_load", "topology"),
])
def test_a_recorded_event_stream_replays_into_fresh_cores(monkeypatch, cluster, workload, dispatch, queue):
    wl = load_workload(workload)
    monkeypatch.setattr(sim_run, "SchedulerCore", Recording)
    Recording.made.clear()
    result = simulate(BUILTIN_CLUSTERS[cluster], wl, PolicySpec(dispatch, queue), standalone=[1.0] * len(wl.queries))
    assert len(result.queries) == len(wl.queries) and all(q.failed is None for q in result.queries)
    [run] = Recording.made
    events = [ev for ev, _ in run.log]
    assert any(isinstance(ev, QueryArrived) for ev in events)
    specs, _, queue_factory, profile = run.args[:4]

    def replay() -> list[list]:
        core = SchedulerCore(specs, make_dispatch(dispatch), queue_factory, profile,
                             OutputPredictor(wl.output_priors), **run.kw)
        return [core.handle(ev) for ev in events]

    first, second = replay(), replay()
    assert first == [cmds for _, cmds in run.log]
    assert second == first
