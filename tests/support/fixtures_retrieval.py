"""Shared fixtures for the retrieval components (load with `pytest_plugins`).

* `embedder` (session): WordLlama 256-dim, loaded offline from its wheel;
* `corpus_dir` (session): a small corpus of three topical text files;
* `search_service` (session): the BM25 search service over that corpus and the
  project's README, in its own process on 127.0.0.1, key `sk-search`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowserve.retrieval.embedding import Embedder
from flowserve.retrieval.process import SAMPLE_CORPUS, SearchServiceProcess, write_corpus

SEARCH_KEY = "sk-search"
README = Path(__file__).resolve().parents[2] / "README.md"
TOPICS = {name: SAMPLE_CORPUS[name] for name in ("volcano.txt", "bread.txt", "orbit.txt")}


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return Embedder(256)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"), TOPICS)


@pytest.fixture(scope="session")
def search_service(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchServiceProcess]:
    log = tmp_path_factory.mktemp("search") / "search.log"
    with SearchServiceProcess([corpus_dir, README], key=SEARCH_KEY, log_path=log) as svc:
        yield svc
