"""The headers that make an OpenAI call part of a program, read and checked.

* `x-flowserve-program: <id>` — the program the call belongs to (client-chosen);
* `x-flowserve-stage: <name>` — the step's name (stage priors, metrics);
* `x-flowserve-thread: <id>` — calls of one program that run in parallel.

Each value is 1..128 visible ASCII characters (letters, digits, punctuation; no spaces or
control characters), so it is safe in logs, JSON and trace files. A program id is also a
path segment (`/v1/programs/{id}`): it holds no `/` and is not `.` or `..`, which no URL
could name (a client quotes the rest: `job?2` is `/v1/programs/job%3F2`). A stage or
thread without a program is refused: it would be accepted and then ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flowserve.host.intake.openai_api import APIError

MAX_NAME = 128
PROGRAM, STAGE, THREAD = "x-flowserve-program", "x-flowserve-stage", "x-flowserve-thread"


@dataclass(frozen=True, slots=True)
class ProgramHeaders:
    program: str
    stage: str | None = None
    thread: str | None = None


def checked_name(value: str, header: str) -> str:
    """A header's value as a program, stage or thread name, or a 400 naming the header."""
    if not 1 <= len(value) <= MAX_NAME:
        raise APIError(400, f"{header}: expected 1 to {MAX_NAME} characters, got {len(value)}", param=header)
    if not all("!" <= ch <= "~" for ch in value):
        raise APIError(400, f"{header}: only visible ASCII characters (no spaces or control characters)",
                       param=header)
    return value


def program_id(value: str) -> str:
    """x-flowserve-program's value: a name that is also one path segment."""
    checked_name(value, PROGRAM)
    if "/" in value or value in (".", ".."):
        raise APIError(400, f"{PROGRAM}: a program id is one URL path segment (/v1/programs/ID): no '/', "
                            f"and not '.' or '..'", param=PROGRAM)
    return value


def read_program_headers(h: Mapping[str, str]) -> ProgramHeaders | None:
    """The program headers of a request (lower-cased names), None without a program."""
    if PROGRAM not in h:
        for other in (STAGE, THREAD):
            if other in h:
                raise APIError(400, f"{other} needs {PROGRAM}: stages and threads belong to a program", param=other)
        return None
    return ProgramHeaders(program_id(h[PROGRAM]),
                          checked_name(h[STAGE], STAGE) if STAGE in h else None,
                          checked_name(h[THREAD], THREAD) if THREAD in h else None)
