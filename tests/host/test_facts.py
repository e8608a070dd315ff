"""The host's facts and their listener table, mirroring the drivers' command tables: every
fact type has its list in a composed host (a new fact without one fails here), a table
that misses one is refused at composition, and a run publishes what it did, in order."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from live_support import run, sim_spec, single

from flowserve.host.facts import FACTS, CallEnded, CallSent, InstanceOpened, Listeners, ProgramEnded, QueryEnded
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.types.events import CallFinished
from flowserve.types.programs import ProgramEnd


def test_the_union_is_what_the_host_publishes() -> None:
    assert len(FACTS) >= 7
    assert all(dataclasses.is_dataclass(f) and f.__dataclass_params__.frozen for f in FACTS)  # type: ignore[attr-defined]


def test_every_fact_has_its_listeners_in_a_composed_host(tmp_path: Path) -> None:
    d = compose_driver([sim_spec("a")], GatewaySettings(record=str(tmp_path)))
    assert set(d.facts.table) == set(FACTS)
    assert all(d.facts.table[f] for f in FACTS), [f.__name__ for f in FACTS if not d.facts.table[f]]


def test_a_table_that_misses_a_fact_is_refused() -> None:
    with pytest.raises(TypeError, match=r"no list for \['ProgramEnded'\], not a fact: \[\]"):
        Listeners({f: [] for f in FACTS if f is not ProgramEnded})
    with pytest.raises(TypeError, match=r"not a fact: \['int'\]"):
        Listeners({**{f: [] for f in FACTS}, int: []})


def test_listeners_hear_a_fact_in_their_order() -> None:
    heard: list[tuple[str, Any]] = []
    table = Listeners({**{f: [] for f in FACTS},
                       ProgramEnded: [lambda f: heard.append(("first", f)), lambda f: heard.append(("second", f))]})
    fact = ProgramEnded(1.0, ProgramEnd.DELETED, True, None)
    table.publish(fact)
    assert heard == [("first", fact), ("second", fact)]


def test_a_query_publishes_its_call_sent_and_ended_then_its_end() -> None:
    heard: list[Any] = []

    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(time_scale=100.0),
                           listeners={f: [heard.append] for f in (InstanceOpened, CallSent, CallEnded, QueryEnded)})
        await d.start()
        try:
            r = await d.run("completion", single(range(50), max_tokens=3))
        finally:
            await d.shutdown()
        assert r.completed

    run(body())
    kinds = [type(f).__name__ for f in heard]
    assert kinds == ["InstanceOpened", "CallSent", "CallEnded", "QueryEnded"]
    opened, sent, ended, done = heard
    assert opened.spec.name == "a" and sent.instance == "a" and sent.call.prompt == tuple(range(50))
    assert sent.query is not None and sent.query.workflow == "completion" and sent.query is done.query
    assert ended.call_id == sent.call.id and ended.current and isinstance(ended.outcome, CallFinished)
    assert ended.outcome.output_tokens == 3
    assert done.result.completed and done.done is not None and done.failed is None
