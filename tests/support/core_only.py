"""Run pytest as if only the core's dependencies were installed: every other third-party
package is unimportable (an import finder refuses it), so a test folder of the core, or a
module of it, that imports httpx, fastapi, duckdb, rich, ... fails here.

    python tests/support/core_only.py tests/core tests/policies tests/graph tests/sim

imports every module of the core's packages, then runs pytest with the arguments given
(tests/test_core_dependencies.py runs it with `--collect-only`). Only what flowserve's
core packages import themselves counts as a core dependency, with the packages those
need in turn; pytest and hypothesis are the tests' own.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import pkgutil
import re
import site
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
CORE_PACKAGES = ("core", "types", "policies", "graph", "cache", "profiles", "sim")
CORE_DEPENDENCIES = ("numpy", "scipy", "pydantic", "PyYAML")  # what CORE_PACKAGES import, nothing else
TEST_DEPENDENCIES = ("pytest", "hypothesis")
HYPOTHESIS_PLUGIN = "_hypothesis_pytestplugin"  # loaded by name: other installed plugins stay off


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(roots: Iterable[str]) -> set[str]:
    """The installed distributions `roots` need, theirs included (extras left out)."""
    seen: set[str] = set()
    todo = [canonical(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return seen


def allowed_modules(roots: Sequence[str] = CORE_DEPENDENCIES + TEST_DEPENDENCIES) -> frozenset[str]:
    """Top-level module names of the distributions `roots` need."""
    dists = distributions(roots)
    return frozenset(mod for mod, owners in importlib.metadata.packages_distributions().items()
                     if any(canonical(d) in dists for d in owners))


class CoreOnly(importlib.abc.MetaPathFinder):
    """Refuses a top-level module installed in site-packages unless it is in `allowed`; the
    standard library and the repository's own modules (flowserve, the tests' support
    files) always import."""

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed
        self.installed = [Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages())]

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if "." in name or name in self.allowed or name == "flowserve":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name)
        origin = (spec.origin or next(iter(spec.submodule_search_locations or ()), "")) if spec else ""
        if not origin or not any(Path(origin).resolve().is_relative_to(p) for p in self.installed):
            return None
        raise ModuleNotFoundError(f"{name} is not one of the core's dependencies ({', '.join(CORE_DEPENDENCIES)})",
                                  name=name)


def import_core() -> None:
    for package in CORE_PACKAGES:
        top = importlib.import_module(f"flowserve.{package}")
        for info in pkgutil.walk_packages(top.__path__, f"{top.__name__}."):
            importlib.import_module(info.name)


def main(args: Sequence[str]) -> int:
    sys.meta_path.insert(0, CoreOnly(allowed_modules()))
    import_core()
    import pytest

    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # an environment with only the core has no other plugins
    # the project's addopts without xdist's options: xdist is a test-tool plugin, not a core dependency
    addopts = "-q --import-mode=importlib --strict-markers"
    return int(pytest.main(["-p", HYPOTHESIS_PLUGIN, "-o", f"addopts={addopts}", *args]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
