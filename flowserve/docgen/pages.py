"""The generated pages of the docs site: render them, write the ones that changed, list
the stale ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowserve.docgen.cli_reference import cli_reference
from flowserve.docgen.config_reference import config_reference
from flowserve.docgen.policy_catalogue import policy_catalogue
from flowserve.docgen.sweet_spots import sweet_spot_table

GENERATED: dict[str, Callable[[], str]] = {
    "reference/configuration.md": config_reference,
    "reference/policies.md": policy_catalogue,
    "reference/cli.md": cli_reference,
    "reference/sweet-spots.md": sweet_spot_table,
}


def render() -> dict[str, str]:
    return {path: make() for path, make in GENERATED.items()}


def stale(docs_dir: Path) -> list[str]:
    """Generated pages whose file in `docs_dir` differs from what the code says now."""
    return [path for path, text in render().items()
            if not (docs_dir / path).is_file() or (docs_dir / path).read_text() != text]


def write(docs_dir: Path) -> list[str]:
    """Write the stale pages only (an unchanged file keeps its time, so `mkdocs serve`
    does not rebuild forever)."""
    pages = render()
    changed = stale(docs_dir)
    for path in changed:
        (docs_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (docs_dir / path).write_text(pages[path])
    return changed
