"""The OpenAI Batch API over HTTP: `/v1/files` (upload, list, get, content) and
`/v1/batches` (create, list, get, cancel), as OpenAI's API and its official client
(`files.create`, `batches.create`, `batches.retrieve`, `files.content`) speak them.

A tenant sees only its own files and batches: another's id answers 404, as an unknown
one does. Every refusal names its field: an upload too large (413, `file`), too many
lines (400, `file`), an unknown `endpoint` or `completion_window` (400), an input file
that is not the tenant's (404, `input_file_id`), too many open batches (429). The
batches run in the runner (`flowserve.batches.runner`), which this face starts with the
sender of its lines (`flowserve.gateway.batch_lines`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile

from flowserve.batches.jsonl import count_lines
from flowserve.batches.records import BadTransition, BatchRecord, BatchStatus, FileRecord, new_id
from flowserve.batches.runner import BatchRunner, LineSender
from flowserve.batches.settings import ENDPOINTS, BatchSettings, window_seconds
from flowserve.batches.store import BatchStore, FileFolder
from flowserve.host.intake.openai_api import APIError, decode_json

CREATE_FIELDS = frozenset({"input_file_id", "endpoint", "completion_window", "metadata"})
MAX_METADATA = 16  # pairs; keys ≤ 64 characters, values ≤ 512 (OpenAI's limits)
MAX_LIST = 100


def not_found(what: str, ident: str, param: str | None = None) -> APIError:
    return APIError(404, f"no {what} {ident!r}", code=f"{what}_not_found", param=param)


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_METADATA or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in value.items()):
        raise APIError(400, f"metadata: expected at most {MAX_METADATA} pairs of strings (keys up to 64 characters, "
                            "values up to 512)", param="metadata")
    return value


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST:
        raise APIError(400, f"limit: expected an integer from 1 to {MAX_LIST}", param="limit")
    return int(raw)


def page(items: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """One page of a list, newest first, after the item `after` (OpenAI's cursor)."""
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    data = items[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(items) > limit}


class BatchAPI:
    def __init__(self, settings: BatchSettings, store: BatchStore, folder: FileFolder, send: LineSender,
                 tenant: Callable[[Request], str], clock: Callable[[], float] = time.time) -> None:
        """tenant: a request's authenticated tenant."""
        self.settings = settings
        self.store = store
        self.folder = folder
        self._send = send
        self._tenant = tenant
        self._clock = clock
        self._runner: BatchRunner | None = None

    @property
    def runner(self) -> BatchRunner:
        if self._runner is None:
            raise RuntimeError("the Batch API has not started")
        return self._runner

    def start(self, owner: str | None) -> None:
        """Once the host runs: run the open batches; owner: this process's name in the
        batches' leases (a replica's name)."""
        self._runner = BatchRunner(self.store, self.folder, self.settings, self._send, self._clock,
                                   owner or f"{socket.gethostname()[:32]}-{os.getpid()}")
        self._runner.start()

    async def stop(self, grace_s: float) -> None:
        if self._runner is not None:
            await self._runner.stop(grace_s)

    # ------------------------------------------------------------------ files

    async def upload(self, request: Request) -> Response:
        tenant = self._tenant(request)
        s = self.settings
        form = await request.form(max_files=1, max_fields=8)
        try:
            purpose = form.get("purpose")
            if purpose != "batch":
                raise APIError(400, f"purpose: expected \"batch\", got {purpose!r} (this gateway keeps the Batch "
                                    "API's files only)", param="purpose")
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise APIError(400, "file: missing (send the JSONL file as the multipart field `file`)",
                               param="file")
            if upload.size is not None and upload.size > s.max_file_bytes:
                raise APIError(413, f"file: {upload.size} bytes; at most {s.max_file_bytes} "
                                    "(gateway.batches.max_file_bytes)", code="file_too_large", param="file")
            data = await upload.read()
        finally:
            await form.close()
        lines = await asyncio.to_thread(count_lines, data)
        if lines > s.max_lines:
            raise APIError(400, f"file: {lines} requests; at most {s.max_lines} in one file "
                                "(gateway.batches.max_lines)", code="too_many_lines", param="file")
        if lines == 0:
            raise APIError(400, "file: it holds no request (one JSON object a line)", param="file")
        rec = FileRecord(new_id("file-"), tenant, upload.filename or "input.jsonl", "batch", len(data), lines,
                         int(self._clock()))
        await asyncio.to_thread(self.folder.write, rec.id, data)
        await self.store.add_file(rec)
        return JSONResponse(rec.openai())

    async def tenant_file(self, request: Request, file_id: str, param: str | None = None) -> FileRecord:
        rec = await self.store.file(file_id)
        if rec is None or rec.tenant != self._tenant(request):
            raise not_found("file", file_id, param)
        return rec

    async def file(self, request: Request, file_id: str) -> Response:
        return JSONResponse((await self.tenant_file(request, file_id)).openai())

    async def files(self, request: Request) -> Response:
        recs = await self.store.files(self._tenant(request))
        return JSONResponse({"object": "list", "data": [r.openai() for r in recs], "has_more": False})

    async def content(self, request: Request, file_id: str) -> Response:
        rec = await self.tenant_file(request, file_id)
        data = await asyncio.to_thread(self.folder.read, rec.id)
        return Response(data, media_type="application/jsonl")

    # ------------------------------------------------------------------ batches

    async def create(self, request: Request) -> Response:
        tenant = self._tenant(request)
        body = decode_json(await request.body())
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        unknown = sorted(set(body) - CREATE_FIELDS)
        if unknown:
            raise APIError(400, f"{unknown[0]}: unknown field; a batch takes {sorted(CREATE_FIELDS)}",
                           param=unknown[0])
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise APIError(400, f"endpoint: expected one of {list(ENDPOINTS)}, got {endpoint!r}", param="endpoint")
        window = body.get("completion_window")
        if window not in self.settings.completion_windows:
            raise APIError(400, f"completion_window: expected one of {self.settings.completion_windows}, got "
                                f"{window!r}", param="completion_window")
        file_id = body.get("input_file_id")
        if not isinstance(file_id, str):
            raise APIError(400, "input_file_id: expected the id of an uploaded file", param="input_file_id")
        source = await self.tenant_file(request, file_id, "input_file_id")
        if source.purpose != "batch":
            raise APIError(400, f"input_file_id: file {file_id!r} has purpose {source.purpose!r}; a batch reads "
                                "files uploaded with purpose \"batch\"", param="input_file_id")
        now = int(self._clock())
        rec = BatchRecord(new_id("batch_"), tenant, file_id, endpoint, window, now, now + window_seconds(window),
                          metadata=_metadata(body.get("metadata")))
        if not await self.store.add_batch(rec, self.settings.max_open_batches):
            raise APIError(429, f"this tenant has {self.settings.max_open_batches} batches open already "
                                "(gateway.batches.max_open_batches); wait for one to end", "rate_limit_error",
                           "batch_limit_exceeded")
        self.runner.wake()
        return JSONResponse(rec.openai())

    async def tenant_batch(self, request: Request, batch_id: str) -> BatchRecord:
        rec = await self.store.batch(batch_id)
        if rec is None or rec.tenant != self._tenant(request):
            raise not_found("batch", batch_id)
        return rec

    async def batch(self, request: Request, batch_id: str) -> Response:
        return JSONResponse((await self.tenant_batch(request, batch_id)).openai())

    async def batches(self, request: Request) -> Response:
        limit = _limit(request)
        recs = await self.store.batches(self._tenant(request))
        return JSONResponse(page([r.openai() for r in recs], request.query_params.get("after"), limit))

    async def cancel(self, request: Request, batch_id: str) -> Response:
        rec = await self.tenant_batch(request, batch_id)
        try:
            rec = await self.store.move(batch_id, BatchStatus.CANCELLING, int(self._clock()))
        except BadTransition:
            raise APIError(409, f"batch {batch_id!r} is {rec.status}; only a batch still validating or in "
                                "progress can be cancelled", code="batch_not_cancellable") from None
        self.runner.wake()
        return JSONResponse(rec.openai())
