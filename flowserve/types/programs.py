"""How a program (a client-driven query that grows call by call) ends: the gateway's
program book decides it, the replicas' shared registry stores it (as its value) and
parses it back at the boundary (`flowserve.replicas.programs.parse_program`)."""

from __future__ import annotations

from enum import StrEnum


class ProgramEnd(StrEnum):
    """Why a program ends (its value is what summaries, metrics and the registry show)."""

    DELETED = "deleted"  # its client deleted it
    IDLE = "idle"  # no call came for programs.idle_s
    DURATION = "duration"  # open longer than programs.max_duration_s
    FAILED = "failed"  # the core failed it
    SHUTDOWN = "shutdown"  # the gateway shut down
