"""`role`: prefill/decode roles; instances that declare none are kept (the hook for P/D)."""

from __future__ import annotations

import dataclasses

import pytest
from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.filters.role import RoleFilter, plays


def test_plays_by_hand() -> None:
    assert plays(None, "decode") and plays("both", "prefill")
    assert plays("decode", "decode") and not plays("prefill", "decode")


def test_instances_without_a_role_are_all_kept() -> None:
    h, (a, b) = harness_with(["a", "b"])
    d = decision(h, call(), [a, b])
    assert [RoleFilter("prefill").keep(i, d) for i in (a, b)] == [True, True]


def test_an_instance_that_declares_a_role_is_filtered_by_it() -> None:
    @dataclasses.dataclass(frozen=True)
    class RoleSpec:  # a spec with the field the disaggregation work adds
        role: str

    h, (a, b) = harness_with(["a", "b"])
    a.spec, b.spec = RoleSpec("prefill"), RoleSpec("decode")  # type: ignore[assignment]
    d = decision(h, call(), [a, b])
    assert [RoleFilter("decode").keep(i, d) for i in (a, b)] == [False, True]
    with pytest.raises(ValueError, match="role"):
        RoleFilter("both")  # type: ignore[arg-type]
