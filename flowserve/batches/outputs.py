"""A batch's output and error files, written from its recorded results when it ends.

Their ids follow from the batch's, so a batch finished again after a crash in the middle
of finishing writes the same files, not a second pair."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson

from flowserve.batches.records import BatchRecord, FileRecord, LineResult
from flowserve.batches.store import BatchStore, FileFolder


def output_file_ids(batch_id: str) -> tuple[str, str]:
    """The ids of a batch's output and error files."""
    tail = batch_id.removeprefix("batch_")
    return f"file-{tail}-output", f"file-{tail}-errors"


def jsonl(batch_id: str, results: Sequence[LineResult]) -> bytes:
    return b"".join(orjson.dumps(r.output_line(batch_id)) + b"\n" for r in results)


async def write_outputs(rec: BatchRecord, store: BatchStore, folder: FileFolder, now: int
                        ) -> tuple[str | None, str | None]:
    """Write the batch's files (answers that succeeded; the rest) and register them; their
    ids, None for a file that would be empty."""
    results = await store.results(rec.id)
    ids: list[str | None] = []
    for file_id, part in zip(output_file_ids(rec.id), ([r for r in results if r.ok], [r for r in results if not r.ok]),
                             strict=True):
        if not part:
            ids.append(None)
            continue
        data = jsonl(rec.id, part)
        await asyncio.to_thread(folder.write, file_id, data)
        await store.add_file(FileRecord(file_id, rec.tenant, f"{file_id}.jsonl", "batch_output", len(data),
                                        len(part), now))
        ids.append(file_id)
    return ids[0], ids[1]
