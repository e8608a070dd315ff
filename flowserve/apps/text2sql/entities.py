"""Information retrieval over a database's values and descriptions (CHESS's retrievers).

* `EntityIndex`: every distinct text value of every text column in a MinHash-LSH index
  (`datasketch`; character 3-gram shingles), built once per database. A keyword finds
  the values whose shingle sets are similar (LSH candidates), ranked by edit similarity —
  so "AC/DC" finds `Artist.Name = 'AC/DC'` and a misspelt "Aerosmit" finds 'Aerosmith'.
* `column_context`: the column and table descriptions most related to the keywords
  (name and description overlap), CHESS's context retrieval without a vector store.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from collections.abc import Iterable, Sequence

from flowserve.apps.text2sql.catalog import Catalog

NUM_PERM = 64
THRESHOLD = 0.3  # LSH Jaccard threshold on 3-gram sets: generous, ranking does the rest
MIN_SIMILARITY = 0.55  # edit similarity (difflib ratio, case-insensitive) a match needs
SEED = 1


def shingles(text: str, k: int = 3) -> set[bytes]:
    t = f" {text.lower().strip()} "
    return {t[i:i + k].encode() for i in range(max(1, len(t) - k + 1))}


def parse_keywords(answer: str | None) -> list[str]:
    """Keywords from the model's answer: the JSON its response format asks for
    (`{"keywords": [...]}`), else a Python/JSON-style list or one per line/comma (engines
    that hold no model to a response format)."""
    if not answer:
        return []
    try:
        data = json.loads(answer)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("keywords"), list):
        items = [k for k in data["keywords"] if isinstance(k, str)]
    else:
        body = answer.strip()
        m = re.search(r"\[(.*)\]", body, re.S)
        if m:
            body = m.group(1)
        items = re.split(r"[\n,;]", body)
    out: list[str] = []
    for it in items:
        k = it.strip().strip("-*•").strip().strip("'\"`").strip()
        if k and len(k) <= 100 and k.lower() not in (x.lower() for x in out):
            out.append(k)
    return out[:20]


class EntityIndex:
    def __init__(self, catalog: Catalog) -> None:
        from datasketch import MinHash, MinHashLSH  # here: its scipy import costs the gateway's start a second

        self.lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        self.values: list[tuple[str, str, str]] = []  # (table, column, value)
        items = [(t, c, v) for (t, c), vals in catalog.values.items() for v in vals]
        sets = [list(shingles(v)) for _, _, v in items]
        if sets:
            hashes = MinHash.bulk(sets, num_perm=NUM_PERM, seed=SEED)
            with self.lsh.insertion_session() as session:
                for i, (item, h) in enumerate(zip(items, hashes, strict=True)):
                    session.insert(i, h)
                    self.values.append(item)

    def lookup(self, keywords: Iterable[str], per_keyword: int = 5) -> list[tuple[str, str, str, float]]:
        """(table, column, value, similarity) matches, best first per keyword, deduplicated."""
        from datasketch import MinHash

        out: dict[tuple[str, str, str], float] = {}
        for kw in keywords:
            h = MinHash(num_perm=NUM_PERM, seed=SEED)
            h.update_batch(list(shingles(kw)))
            scored = []
            for i in self.lsh.query(h):
                t, c, v = self.values[i]
                sim = difflib.SequenceMatcher(None, kw.lower(), v.lower()).ratio()
                if sim >= MIN_SIMILARITY:
                    scored.append((sim, t, c, v))
            scored.sort(key=lambda x: (-x[0], x[1], x[2], x[3]))
            for sim, t, c, v in scored[:per_keyword]:
                out[(t, c, v)] = max(sim, out.get((t, c, v), 0.0))
        return [(t, c, v, s) for (t, c, v), s in out.items()]

    def __len__(self) -> int:
        return len(self.values)


class EntityIndexes:
    """One `EntityIndex` per database, built on first use (a worker thread of the tool
    runner) under a lock, so start-up stays fast and each database is indexed once."""

    def __init__(self, catalogs: Iterable[Catalog]) -> None:
        self._catalogs = {c.path: c for c in catalogs}
        self._built: dict[str, EntityIndex] = {}
        self._lock = threading.Lock()

    def get(self, path: str) -> EntityIndex:
        with self._lock:
            if path not in self._built:
                self._built[path] = EntityIndex(self._catalogs[path])
            return self._built[path]

    def warm(self) -> None:
        for path in self._catalogs:
            self.get(path)


def render_entities(matches: Sequence[tuple[str, str, str, float]]) -> str:
    if not matches:
        return "(no database value matches the keywords)"
    return "\n".join(f"{t}.{c} = {v!r}" for t, c, v, _ in matches)


def _words(text: str) -> set[str]:
    parts = re.findall(r"[A-Za-z]+|\d+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text))
    return {p.lower().rstrip("s") for p in parts if len(p) > 1}


def column_context(catalog: Catalog, keywords: Iterable[str], top: int = 12) -> str:
    """The descriptions of the columns whose names or descriptions share words with the
    keywords, most shared first; each with its table's description."""
    want = set().union(*(_words(k) for k in keywords)) if keywords else set()
    scored = []
    for t in catalog.tables:
        for i, c in enumerate(t.columns):
            score = len(want & _words(f"{t.name} {c.name}")) * 2 + len(want & _words(c.description))
            if score:
                scored.append((score, -i, t, c))
    scored.sort(key=lambda x: (-x[0], x[2].name, -x[1]))
    if not scored:
        return "(no column description matches the keywords)"
    return "\n".join(f"{t.name}.{c.name}: {c.description}" for _, _, t, c in scored[:top])

