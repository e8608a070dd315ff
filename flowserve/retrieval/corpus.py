"""The search corpus: text files (the papers, the project's docs) cut into overlapping
token chunks (256 tokens, overlap 30 by default), each a document with a title and URL."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowserve.retrieval.embedding import chunk_tokens
from flowserve.retrieval.errors import RetrievalError

SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class Doc:
    id: int
    title: str
    url: str
    text: str


def corpus_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, plus the .txt / .md files of folders named (sorted, deduplicated)."""
    out: dict[Path, None] = {}
    for p in map(Path, paths):
        if p.is_dir():
            out.update(dict.fromkeys(sorted(f for f in p.iterdir() if f.suffix in SUFFIXES and f.is_file())))
        elif p.is_file():
            out[p] = None
        else:
            raise RetrievalError(f"corpus: no file or folder {str(p)!r}")
    return list(out)


def build_corpus(paths: Iterable[str | Path], tokenizer: Any, size: int = 256, overlap: int = 30) -> list[Doc]:
    docs: list[Doc] = []
    for f in corpus_files(paths):
        text = f.read_text(encoding="utf-8", errors="replace")
        title = next((line.strip(" #") for line in text.splitlines() if line.strip()), f.stem)[:120]
        for i, chunk in enumerate(chunk_tokens(text, tokenizer, size, overlap)):
            docs.append(Doc(len(docs), title, f"{f.resolve().as_uri()}#chunk{i}", chunk))
    if not docs:
        raise RetrievalError("corpus: the files hold no text")
    return docs
