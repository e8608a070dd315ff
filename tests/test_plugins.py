"""Loading the user's code by import path: every failure is one ConfigError line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def console_script_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """sys.path as a console script such as `flowserve` has it (no current directory), and a
    project folder as the current directory; the modules imported here are forgotten after."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(project))])
    before = set(sys.modules)
    yield project
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_module_in_the_current_directory_loads_without_installation(console_script_path: Path) -> None:
    (console_script_path / "flows_here").mkdir()
    (console_script_path / "flows_here" / "mine.py").write_text("class Mine:\n    pass\n")
    assert load_object("flows_here.mine:Mine", "workflow").__name__ == "Mine"


def test_an_installed_module_wins_over_one_of_the_same_name_in_the_current_directory(
        console_script_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "same_name_mod.py").write_text("WHERE = 'installed'\n")
    (console_script_path / "same_name_mod.py").write_text("WHERE = 'here'\n")
    monkeypatch.syspath_prepend(str(site))
    assert load_object("same_name_mod:WHERE", "value") == "installed"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_reference_loads_or_fails_with_a_config_error(ref: str) -> None:
    try:
        load_object(ref, "policy")
    except ConfigError as e:
        assert "\n" not in str(e)
