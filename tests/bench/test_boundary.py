"""Nothing below the command line depends on the benchmarks: a module of the package outside
`flowserve/bench` and `flowserve/cli` that imports `flowserve.bench` (also under
`TYPE_CHECKING`, inside a function, relatively) or names one of its modules for a child
process (`python -m flowserve.bench...`) fails this test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from repo_paths import ROOT

PACKAGE = ROOT / "flowserve"
ABOVE = ("flowserve.bench", "flowserve.cli")  # the experiments, and the command line that runs them
BENCH = re.compile(r"^flowserve\.bench(\.|:|$)")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in the module, relative ones resolved, and of
    every string that names a bench module."""
    here = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and BENCH.match(node.value):
            found.append((node.lineno, node.value))
    return found


def bench_imports(path: Path) -> list[str]:
    module = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(ROOT)}:{line}: {name}"
            for line, name in imported(tree, module, path.name == "__init__.py") if BENCH.match(name)]


def test_no_module_below_the_command_line_imports_the_benchmarks() -> None:
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py")) if not module_name(path).startswith(ABOVE)
                 for hit in bench_imports(path)]
    assert not offenders, "these modules import flowserve.bench (move what they need out of it):\n" + \
        "\n".join(offenders)


def test_the_check_sees_every_form_of_import(tmp_path: Path) -> None:
    sources = {
        "plain": "import flowserve.bench.demo\n",
        "from": "from flowserve.bench.hexgen import run_hexgen_bench\n",
        "package": "from flowserve import bench\n",
        "relative": "from ..bench import preble\n",
        "typing": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from flowserve.bench.teola import APPS\n",
        "lazy": "def f():\n    from flowserve.bench.live import run_live_bench\n",
        "child": "ARGS = ['-m', 'flowserve.bench.live:bare_app']\n",
    }
    for name, source in sources.items():
        tree = ast.parse(source)
        names = [n for _, n in imported(tree, "flowserve.sim.x", is_package=False)]
        assert any(BENCH.match(n) for n in names), name
    clean = ast.parse("from flowserve.benchmarks import x\nimport flowserve.sim.compare\nDOC = 'flowserve bench'\n")
    assert not any(BENCH.match(n) for _, n in imported(clean, "flowserve.sim.x", is_package=False))
