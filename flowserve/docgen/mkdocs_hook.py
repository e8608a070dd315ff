"""mkdocs hook (`hooks:` in mkdocs.yml): regenerate the reference pages before every build,
so the site never shows a stale configuration reference or policy catalogue."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowserve.docgen.pages import stale, write

CHECK_ONLY = "FLOWSERVE_DOCGEN_CHECK"  # set: a stale page fails the build instead of being rewritten


def on_pre_build(config: Any) -> None:
    docs = Path(config["docs_dir"])
    if os.environ.get(CHECK_ONLY):
        old = stale(docs)
        if old:
            raise RuntimeError(f"stale generated pages {old}: run python -m flowserve.docgen")
        return
    write(docs)
