"""No object sets a field on another object after construction: in `flowserve/`, every
assignment to an attribute (`x.y = …`, `x.y += …`, `x.y: T = …`, `del x.y`) assigns to
`self` or `cls`. What one part must learn from another arrives through a method of its
own, through its constructor, or as a typed fact (`flowserve.host.facts`).

The allow-list holds what third-party libraries can only be configured by, each with its
reason; an entry that no longer matches anything fails too, so the list cannot go stale."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flowserve"

ALLOWED: dict[tuple[str, str], str] = {
    ("flowserve/engines/tinymodel.py", "tok.pre_tokenizer"):
        "HF tokenizers: a fresh local Tokenizer is configured by attribute (its API has no setter)",
    ("flowserve/engines/tinymodel.py", "tok.decoder"):
        "HF tokenizers: a fresh local Tokenizer is configured by attribute (its API has no setter)",
    ("flowserve/sql/spark.py", "spark.sparkContext.pythonExec"):
        "PySpark: the Python its executors run, set on the running context (its API has no setter)",
}


def field_sets(package: Path) -> list[tuple[str, int, str]]:
    """(module path, line, target) of every attribute assignment whose object is not `self`
    or `cls` (a plain name), in the package's modules."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package.parent))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assign | ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            stack = list(targets)
            while stack:
                t = stack.pop()
                if isinstance(t, ast.Tuple | ast.List):
                    stack.extend(t.elts)
                elif isinstance(t, ast.Starred):
                    stack.append(t.value)
                elif isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name)
                                                           and t.value.id in ("self", "cls")):
                    found.append((rel, node.lineno, ast.unparse(t)))
    return found


def test_the_scan_finds_every_form_of_setting_a_field(tmp_path: Path) -> None:
    pkg = tmp_path / "flowserve"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "class A:\n"
        "    def __init__(self, b):\n"
        "        self.x = 1\n"                 # its own field: fine
        "        self.b, b.y = b, 2\n"          # a tuple target that sets another's field
        "        b.n += 1\n"
        "        self.b.z: int = 3\n"           # a field of a field of its own is another object's
        "        del b.w\n"
        "        local = {}\n"
        "        local['k'] = 1\n"              # a subscript: not a field
        "    @classmethod\n"
        "    def make(cls):\n"
        "        cls.count = 0\n")
    assert field_sets(pkg) == [("flowserve/m.py", 4, "b.y"), ("flowserve/m.py", 5, "b.n"),
                               ("flowserve/m.py", 6, "self.b.z"), ("flowserve/m.py", 7, "b.w")]


def test_no_object_sets_a_field_on_another() -> None:
    sets = [s for s in field_sets(PACKAGE) if (s[0], s[2]) not in ALLOWED]
    assert sets == []


def test_every_allowed_set_still_exists() -> None:
    found = {(path, target) for path, _, target in field_sets(PACKAGE)}
    assert set(ALLOWED) <= found
