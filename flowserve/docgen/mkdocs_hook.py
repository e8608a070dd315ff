"""mkdocs hook (`hooks:` in mkdocs.yml): regenerate the reference pages before every build,
so the site never shows a stale configuration reference or policy catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowserve.docgen.pages import write


def on_pre_build(config: Any) -> None:
    write(Path(config["docs_dir"]))
