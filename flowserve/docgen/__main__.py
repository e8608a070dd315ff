"""`python -m flowserve.docgen [--check] [DOCS_DIR]`: write the generated reference pages
(or, with --check, exit 1 naming the stale ones)."""

from __future__ import annotations

import sys
from pathlib import Path

from flowserve.docgen.pages import stale, write


def main(argv: list[str]) -> int:
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    docs = Path(rest[0]) if rest else Path("docs")
    if not docs.is_dir():
        print(f"error: no docs folder {docs}", file=sys.stderr)
        return 2
    if check:
        old = stale(docs)
        for path in old:
            print(f"stale: {docs / path} (run python -m flowserve.docgen)")
        return 1 if old else 0
    for path in write(docs):
        print(f"wrote {docs / path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
