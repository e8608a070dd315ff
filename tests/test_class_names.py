"""Every class name is unique within the package: one name, one class (a reader who
meets `LivePrograms` or `ProxyExchange` knows which one is meant without its module)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flowserve"


def class_names(package: Path) -> dict[str, list[str]]:
    """Class name → the modules that define a class of that name (nested classes too)."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(package.parent)))
    return where


def test_the_scan_finds_a_duplicate(tmp_path: Path) -> None:
    pkg = tmp_path / "flowserve"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "x.py").write_text("class Book:\n    class Inner: ...\n")
    (pkg / "y.py").write_text("def f():\n    class Book: ...\n")
    found = class_names(pkg)
    assert found["Book"] == ["flowserve/a/x.py", "flowserve/y.py"] and found["Inner"] == ["flowserve/a/x.py"]


def test_every_class_name_is_unique() -> None:
    duplicated = {name: paths for name, paths in class_names(PACKAGE).items() if len(paths) > 1}
    assert duplicated == {}
