"""What the Batch API keeps: files, batches and each line's result, as frozen records, and
the JSON shapes OpenAI's API gives them (`openai.types.FileObject`, `openai.types.Batch`,
and the lines of a batch's output and error files)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class BatchStatus(StrEnum):
    """A batch's life (OpenAI's statuses); a batch in `OPEN` still has work to do."""

    VALIDATING = "validating"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


OPEN = frozenset({BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING, BatchStatus.CANCELLING})
# the status a batch may move to from each (a move elsewhere raises BadTransition)
MOVES: Mapping[BatchStatus, frozenset[BatchStatus]] = {
    BatchStatus.VALIDATING: frozenset({BatchStatus.IN_PROGRESS, BatchStatus.FAILED, BatchStatus.CANCELLING}),
    BatchStatus.IN_PROGRESS: frozenset({BatchStatus.FINALIZING, BatchStatus.CANCELLING, BatchStatus.EXPIRED}),
    BatchStatus.FINALIZING: frozenset({BatchStatus.COMPLETED}),
    BatchStatus.CANCELLING: frozenset({BatchStatus.CANCELLED}),
}
STAMPS: Mapping[BatchStatus, str] = {  # the field that records when a batch entered each status
    BatchStatus.IN_PROGRESS: "in_progress_at", BatchStatus.FINALIZING: "finalizing_at",
    BatchStatus.COMPLETED: "completed_at", BatchStatus.FAILED: "failed_at", BatchStatus.EXPIRED: "expired_at",
    BatchStatus.CANCELLING: "cancelling_at", BatchStatus.CANCELLED: "cancelled_at",
}


class BadTransition(Exception):
    """A batch asked to move to a status it cannot reach from its own."""


def new_id(prefix: str) -> str:
    """An id nobody can guess (a tenant must not find another's files by counting)."""
    return prefix + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    tenant: str
    filename: str
    purpose: str  # batch (uploaded), batch_output (written by a batch)
    bytes: int
    lines: int
    created_at: int

    def openai(self) -> dict[str, Any]:
        """As OpenAI's `FileObject`."""
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed", "expires_at": None,
                "status_details": None}


@dataclass(frozen=True, slots=True)
class RequestCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        return self.completed + self.failed


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: str
    tenant: str
    input_file_id: str
    endpoint: str
    completion_window: str
    created_at: int
    expires_at: int
    status: BatchStatus = BatchStatus.VALIDATING
    metadata: Mapping[str, str] | None = None
    in_progress_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[Mapping[str, Any], ...] = ()  # why the batch failed, when it did
    counts: RequestCounts = field(default_factory=RequestCounts)

    @property
    def open(self) -> bool:
        return self.status in OPEN

    def moved(self, to: BatchStatus, now: int, **fields: Any) -> BatchRecord:
        """This batch in status `to` from `now` (BadTransition if its status cannot reach it)."""
        if to not in MOVES.get(self.status, frozenset()):
            raise BadTransition(f"batch {self.id}: {self.status} cannot become {to}")
        return dataclasses.replace(self, status=to, **{STAMPS[to]: now}, **fields)

    def counted(self, counts: RequestCounts) -> BatchRecord:
        return dataclasses.replace(self, counts=counts)

    def to_doc(self) -> dict[str, Any]:
        """The record as stored (JSON); counts are stored apart, where lines update them."""
        doc = dataclasses.asdict(self)
        del doc["counts"]
        doc["metadata"] = dict(self.metadata) if self.metadata is not None else None
        doc["errors"] = [dict(e) for e in self.errors]
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any], counts: RequestCounts) -> BatchRecord:
        return cls(**{**doc, "status": BatchStatus(doc["status"]), "errors": tuple(doc.get("errors") or ()),
                      "counts": counts})

    def openai(self) -> dict[str, Any]:
        """As OpenAI's `Batch`."""
        doc = self.to_doc()
        del doc["tenant"]
        c = self.counts
        errors = {"object": "list", "data": doc.pop("errors")} if self.errors else None
        return {**doc, "object": "batch", "errors": errors,
                "request_counts": {"total": c.total, "completed": c.completed, "failed": c.failed}}


@dataclass(frozen=True, slots=True)
class LineResult:
    """One input line's outcome, recorded before it is counted: an answer (`status` the
    HTTP status the endpoint gave, `body` its JSON), or a line that never ran (`status`
    None: malformed, expired), with `error` saying why."""

    line: int  # 1-based line number in the input file
    custom_id: str | None
    status: int | None
    request_id: str | None = None
    body: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def output_line(self, batch_id: str) -> dict[str, Any]:
        """Its line in the batch's output file (`ok`) or error file, as OpenAI writes them."""
        response = None if self.status is None else {"status_code": self.status, "request_id": self.request_id,
                                                     "body": self.body}
        error = None
        if not self.ok:
            error = dict(self.error) if self.error is not None else _answer_error(self.body)
            error["line"] = self.line
        return {"id": f"batch_req_{batch_id.removeprefix('batch_')}_{self.line}", "custom_id": self.custom_id,
                "response": response, "error": error}

    def to_doc(self) -> dict[str, Any]:
        return {"line": self.line, "custom_id": self.custom_id, "status": self.status,
                "request_id": self.request_id, "body": self.body, "error": self.error}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> LineResult:
        return cls(**doc)


def _answer_error(body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The error of an answer that was not a success: its OpenAI error body's."""
    err = (body or {}).get("error")
    if isinstance(err, Mapping):
        return {"code": err.get("code"), "message": err.get("message")}
    return {"code": "request_failed", "message": "the request did not succeed"}
