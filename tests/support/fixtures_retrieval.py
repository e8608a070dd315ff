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
from flowserve.retrieval.process import SearchServiceProcess

SEARCH_KEY = "sk-search"
README = Path(__file__).resolve().parents[2] / "README.md"
TOPICS = {
    "volcano.txt": "Volcanoes erupt when magma rises through the crust. Lava flows and ash clouds follow an "
                   "eruption; basalt forms when lava cools. Mount Etna is an active volcano in Sicily.",
    "bread.txt": "Bread dough is made from flour, water, salt and yeast. The yeast ferments sugars and the "
                 "dough rises; baking in a hot oven sets the crumb and browns the crust of the loaf.",
    "orbit.txt": "A satellite stays in orbit because its speed balances the pull of gravity. The Moon orbits "
                 "the Earth every 27 days; geostationary satellites orbit once per day above the equator.",
}


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return Embedder(256)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for name, text in TOPICS.items():
        (d / name).write_text(text)
    return d


@pytest.fixture(scope="session")
def search_service(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SearchServiceProcess]:
    log = tmp_path_factory.mktemp("search") / "search.log"
    with SearchServiceProcess([corpus_dir, README], key=SEARCH_KEY, log_path=log) as svc:
        yield svc
