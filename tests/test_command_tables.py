"""Both drivers answer every command the core can issue, each through one table: a new
command type without a handler in either driver fails here, and a command a driver does
not know is an error, never dropped."""

from __future__ import annotations

import typing
from dataclasses import dataclass

import pytest

from flowserve.config import BUILTIN_CLUSTERS
from flowserve.host.driver import LiveDriver
from flowserve.sim.replicas import ReplicaCores
from flowserve.sim.run import PolicySpec, simulate
from flowserve.sim.simulator import Simulator
from flowserve.types.commands import Command
from flowserve.workloads import load_workload

COMMANDS = set(typing.get_args(Command))


def test_the_union_is_what_the_core_issues():
    assert len(COMMANDS) >= 10 and all(isinstance(c, type) for c in COMMANDS)


@pytest.mark.parametrize("driver", [Simulator, LiveDriver])
def test_every_command_has_a_handler(driver):
    assert set(driver.COMMANDS) == COMMANDS


def test_simulated_replicas_map_every_command_and_route_every_event():
    from flowserve.types.events import Event

    assert set(ReplicaCores._COMMANDS) == COMMANDS
    events = set(typing.get_args(Event))
    peers = {e for e in events if e.__module__ == "flowserve.types.peers"}  # the replicas' own sync makes these
    assert set(ReplicaCores._ROUTES) == events - peers


@dataclass(frozen=True)
class Unknown:
    query_id: int


def test_the_simulator_refuses_a_command_it_does_not_know(monkeypatch):
    from flowserve.core.scheduler import SchedulerCore

    handle = SchedulerCore.handle
    monkeypatch.setattr(SchedulerCore, "handle", lambda self, ev: [*handle(self, ev), Unknown(0)])
    wl = load_workload({"kind": "text2sql", "trace": "mixed", "rate": 1.0, "queries": 1})
    with pytest.raises(TypeError, match="no handler for command Unknown"):
        simulate(BUILTIN_CLUSTERS["hetero-1"], wl, PolicySpec(), standalone=[1.0])
