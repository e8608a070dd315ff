"""Loading the user's code by import path: every failure is one ConfigError line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.graph.workflow import Workflow
from flowserve.plugins import is_import_path, load_class, load_object


def test_import_paths() -> None:
    assert is_import_path("pkg.mod:Name") and is_import_path("a:b.c")
    for bad in ("pkg.mod", "pkg:", ":Name", "pkg.mod:Na me", "1pkg:X", "pkg..mod:X", "pkg:mod:X"):
        assert not is_import_path(bad), bad


def test_load_object_and_class() -> None:
    assert load_object("flowserve.graph.workflow:Workflow", "workflow") is Workflow
    assert load_class("flowserve.graph.workflow:Graph", object, "thing").__name__ == "Graph"
    with pytest.raises(ConfigError, match=r"does not derive from flowserve\.graph\.workflow\.Workflow"):
        load_class("flowserve.graph.workflow:Graph", Workflow, "workflow")
    with pytest.raises(ConfigError, match="function does not derive"):
        load_class("flowserve.plugins:load_object", Workflow, "workflow")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_reference_loads_or_fails_with_a_config_error(ref: str) -> None:
    try:
        load_object(ref, "policy")
    except ConfigError as e:
        assert "\n" not in str(e)
