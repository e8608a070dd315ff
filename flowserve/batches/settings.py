"""The `gateway.batches` section: where the Batch API keeps its files and state, its
limits per tenant, and how many of its requests run at once."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from flowserve.schema import Strict

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")  # what a batch may call
_WINDOW = re.compile(r"^([1-9][0-9]{0,5})([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def window_seconds(window: str) -> int | None:
    """A completion window such as `24h` in seconds (None: not a duration)."""
    m = _WINDOW.match(window)
    return None if m is None else int(m.group(1)) * _UNIT_S[m.group(2)]


class BatchSettings(Strict):
    """The OpenAI Batch API (`/v1/files`, `/v1/batches`; docs/serving.md)."""

    dir: str = Field(description="the folder of the batches' files and, for one process, their state (an SQLite "
                     "database, batches.sqlite); replicas (gateway.state) keep the state in Redis and must all name "
                     "one shared folder")
    max_file_bytes: int = Field(100 << 20, ge=1024, le=1 << 34, description="an uploaded file's size at most; "
                                "beyond, 413 naming `file`")
    max_lines: int = Field(50_000, ge=1, le=10_000_000, description="requests in one input file at most; beyond, "
                           "400 naming `file`")
    max_open_batches: int = Field(100, ge=1, description="a tenant's batches not yet ended; beyond, 429 on "
                                  "POST /v1/batches")
    completion_windows: list[str] = Field(default_factory=lambda: ["24h"], min_length=1, description="the "
                                          "completion windows a batch may ask for (OpenAI has only 24h); a batch "
                                          "not done by then expires")
    max_in_flight: int = Field(1024, ge=1, le=1_000_000, description="a gateway's batch requests sent and not yet "
                               "answered, over all its batches: enough to keep every instance busy, few enough to "
                               "leave the queue's admission limit (gateway.max_queries) to interactive work")
    retry_s: float = Field(1.0, gt=0, le=600, description="a request the gateway refused for overload (429, 503) "
                           "is sent again after this long, or its Retry-After")
    lease_s: float = Field(10.0, gt=0, le=3600, description="replicas: a batch is run by the replica that holds "
                           "its lease; a replica that stops renewing it (killed) loses it after this long and "
                           "another resumes the batch")

    @field_validator("completion_windows")
    @classmethod
    def _windows(cls, v: list[str]) -> list[str]:
        for w in v:
            if window_seconds(w) is None:
                raise ValueError(f"{w!r}: expected a duration such as 24h, 90m or 7d")
        return v
