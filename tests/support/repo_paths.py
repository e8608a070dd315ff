"""What the README and the docs point at: relative links, repository paths and dotted
module names mentioned in them."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("flowserve", "examples", "tests", "benchmarks", ".ci")  # docs/ pages link each other: checked as links
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a path under one of the repository's top folders, as written in prose or code
PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./*{},-]*[\w*}])")
MODULE = re.compile(r"(?<![\w./-])(flowserve(?:\.[A-Za-z_]\w*)+)")
OUTSIDE = re.compile(r"\.\./shared|/work/")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def links(doc: Path) -> Iterator[str]:
    for target in LINK.findall(doc.read_text()):
        if not re.match(r"[a-z]+:|#", target):
            yield target.split("#")[0]


def broken_links(doc: Path) -> list[str]:
    return [t for t in links(doc) if t and not (doc.parent / t).resolve().exists()]


def _exists(path: str) -> bool:
    if any(c in path for c in "*{"):
        pattern = re.sub(r"\{[^}]*\}", "*", path)
        return any(ROOT.glob(pattern))
    return (ROOT / path).exists()


def broken_paths(doc: Path) -> list[str]:
    text = doc.read_text()
    return sorted({p.rstrip(".") for p in PATH.findall(text) if not _exists(p.rstrip("."))})


def outside_paths(doc: Path) -> list[str]:
    return sorted(set(OUTSIDE.findall(doc.read_text())))


def resolves(dotted: str) -> bool:
    """A module, or an attribute of a module (`flowserve.policies.DISPATCH_POLICIES`)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def broken_modules(doc: Path) -> list[str]:
    return sorted({m for m in MODULE.findall(doc.read_text()) if not resolves(m)})
