"""`role`: prefill/decode roles from the instances' specs (`role:` in the cluster YAML)."""

from __future__ import annotations

import dataclasses

import pytest
from scoring_helpers import call, decision, harness_with

from flowserve.policies.scoring.filters.role import RoleFilter, plays


def test_plays_by_hand() -> None:
    assert plays("both", "decode") and plays("both", "prefill")
    assert plays("decode", "decode") and not plays("prefill", "decode") and not plays("decode", "prefill")


def test_instances_of_both_roles_are_all_kept() -> None:
    h, (a, b) = harness_with(["a", "b"])
    d = decision(h, call(), [a, b])
    assert [RoleFilter("prefill").keep(i, d) for i in (a, b)] == [True, True]


def test_an_instance_is_filtered_by_its_role() -> None:
    h, (a, b) = harness_with(["a", "b"])
    a.spec = dataclasses.replace(a.spec, role="prefill")
    b.spec = dataclasses.replace(b.spec, role="decode")
    d = decision(h, call(), [a, b])
    assert [RoleFilter("decode").keep(i, d) for i in (a, b)] == [False, True]
    assert [RoleFilter("prefill").keep(i, d) for i in (a, b)] == [True, False]
    with pytest.raises(ValueError, match="role"):
        RoleFilter("both")  # type: ignore[arg-type]
