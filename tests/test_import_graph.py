"""The package's imports form no cycle — counting those under `if TYPE_CHECKING:`, which
name a type the importer depends on as surely as a run-time import does. A module that
needs a type of a module above it declares a Protocol instead (the policy contract's
`InstanceQueue`, the program store's `LocalBook`, ...). The live side's faces — HTTP
(`flowserve.gateway`) and the endpoint picker (`flowserve.picker`) — depend on the host
(`flowserve.host`), never on each other, and the host on neither."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "flowserve"


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports anywhere (TYPE_CHECKING blocks and
    function bodies included); `from a import b` counts as importing a.b when that is a
    module, else a."""
    paths = {module_name(p, package): p for p in package.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in paths.items():
        base = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [[a.name] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                origin = node.module or ""
                if node.level:
                    parent = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                    origin = f"{parent}.{origin}" if origin else parent
                targets = [[f"{origin}.{a.name}", origin] for a in node.names]
            else:
                continue
            for candidates in targets:
                for target in candidates:
                    found = resolve(target) if target.startswith("flowserve") else None
                    if found is not None:
                        if found != mod:
                            edges.add(found)
                        break
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_only_under_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "flowserve"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("from flowserve.core.b import B\n")
    (pkg / "core" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from flowserve.core import a\n")
    (pkg / "core" / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(pkg)) == [["flowserve.core.a", "flowserve.core.b"]]


@pytest.mark.parametrize(("importer", "imported"), [
    ("flowserve.core.state", "flowserve.core.policy"),
    ("flowserve.types.work", "flowserve.graph.workflow"),
    ("flowserve.graph.prompt", "flowserve.types.work"),
])
def test_named_layers_hold(importer: str, imported: str) -> None:
    assert imported not in import_graph(PACKAGE)[importer]


def test_no_import_cycles_among_flowserve_modules() -> None:
    assert cycles(import_graph(PACKAGE)) == []


FACES = ("flowserve.gateway", "flowserve.picker")
HOST = "flowserve.host"


def _face(module: str) -> str | None:
    return next((f for f in FACES if module == f or module.startswith(f + ".")), None)


def face_crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from one face into another, or from the host into a face."""
    out = []
    for importer, targets in graph.items():
        mine = _face(importer)
        in_host = importer == HOST or importer.startswith(HOST + ".")
        for target in targets:
            theirs = _face(target)
            if theirs is not None and (in_host or (mine is not None and mine != theirs)):
                out.append((importer, target))
    return sorted(out)


def test_the_face_check_finds_a_crossing(tmp_path: Path) -> None:
    pkg = tmp_path / "flowserve"
    for folder in ("gateway", "picker", "host"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "host" / "root.py").write_text("")
    (pkg / "gateway" / "app.py").write_text("from flowserve.host import root\n")
    (pkg / "picker" / "service.py").write_text("from flowserve.gateway.app import x\nfrom flowserve.host import root\n")
    (pkg / "host" / "intake.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from flowserve.picker import service\n")
    assert face_crossings(import_graph(pkg)) == [("flowserve.host.intake", "flowserve.picker.service"),
                                                 ("flowserve.picker.service", "flowserve.gateway.app")]


def test_the_faces_depend_on_the_host_never_on_each_other() -> None:
    assert face_crossings(import_graph(PACKAGE)) == []
