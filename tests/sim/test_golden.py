"""Simulated results on fixed seeds stay exactly what they were (`golden.json`): a change
of the core, the policies or the simulator that moves any figure fails here. A change
meant to move them regenerates the fixture on purpose (`python tests/support/golden_cases.py --write`)."""

from __future__ import annotations

import json

import pytest
from golden_cases import CASES, FIXTURE, summary

GOLDEN = json.loads(FIXTURE.read_text())


def test_fixture_covers_every_case():
    assert sorted(GOLDEN) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulation_matches_golden(name):
    assert summary(name) == GOLDEN[name]
