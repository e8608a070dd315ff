"""Non-LLM primitives of the workflow IR (Teola §4): what each op means and which
engine kind runs it.

A *batchable* op whose name is in `OP_KINDS` runs on a cluster instance of that kind
(`InstanceSpec.kind`): the core queues it there and releases batches that may hold
many queries' ops. Every other op is a tool the driver runs (SQL, user tools, the
cheap `chunk` / `part` / `aggregate` bookkeeping ops).

Its size in the engine's cost profile is `units` (texts to embed, vectors to ingest,
queries to search, documents to rerank); micro-batching (`decompose`) splits units.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# op → engine kind of the instances that run it
OP_KINDS: dict[str, str] = {
    "embed": "embedding",
    "vector_ingest": "vector_db",
    "vector_search": "vector_db",
    "rerank": "reranker",
    "web_search": "search",
}

PART = "part"  # item `index` of a splittable step's output (a line / JSON item)
AGGREGATE = "aggregate"  # joins micro-batches back into one value
CHUNK = "chunk"  # splits a document into overlapping chunks


def ops_of(kind: str) -> list[str]:
    """The ops an engine instance of this kind runs."""
    return [op for op, k in OP_KINDS.items() if k == kind]


def op_units(args: Mapping[str, Any]) -> int:
    """How much work an op is in its engine's cost profile (≥ 1)."""
    units = args.get("units", 1)
    return max(1, int(units)) if isinstance(units, int | float) else 1


def part_key(source: str, index: int) -> str:
    return f"{source}[{index}]"


def micro_key(key: str, index: int) -> str:
    return f"{key}#{index}"


def split_parts(text: str) -> list[str]:
    """The parts of a splittable output: its non-empty lines, list markers stripped."""
    out = []
    for line in text.splitlines():
        line = line.strip().lstrip("-*0123456789.) ").strip()
        if line:
            out.append(line)
    return out


def chunk_count(tokens: int, size: int, overlap: int) -> int:
    """Chunks of `size` tokens, consecutive ones sharing `overlap`, in a text of `tokens` tokens."""
    if tokens <= 0:
        return 0
    step = size - overlap
    return max(1, -(-max(tokens - overlap, 1) // step))
