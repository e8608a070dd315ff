"""A JSON Lines trace, whichever wrote it: a simulation (`flowserve.workloads.trace`: lines
with `steps` or `dag`) or the gateway (`gateway.record`: agent-trace lines of programs and
workflow queries, replayed at their recorded arrivals with stage priors learned as they
run, as the gateway learns them live)."""

from __future__ import annotations

import json
from typing import Any

from flowserve.errors import ConfigError
from flowserve.schema import read_text
from flowserve.workloads.agent_trace import agent_trace
from flowserve.workloads.base import Workload
from flowserve.workloads.trace import read_trace


def jsonl_kind(path: str) -> dict[str, Any]:
    """The workload config of a JSON Lines trace, by its first line."""
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        head = json.loads(first)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {"kind": "trace", "file": path}  # its reader says what is wrong
    if isinstance(head, dict) and ("steps" in head or "dag" in head):
        return {"kind": "trace", "file": path}
    return {"kind": "agent_trace", "file": path, "priors": "online"}


def check_json_lines(path: str) -> None:
    """ConfigError naming the first line that is not a JSON object (a JSON Lines trace has one
    query per line), or a file without any."""
    lines = 0
    for n, line in enumerate(read_text(path, "trace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            item = None
        if not isinstance(item, dict):
            raise ConfigError(f"trace {path!r}: line {n} is not a JSON object; a JSON Lines trace has one query per "
                              f"line (`flowserve serve --record DIR`, `flowserve simulate --record-trace FILE`)")
        lines += 1
    if not lines:
        raise ConfigError(f"trace {path!r} holds no queries")


def read_jsonl_trace(path: str) -> Workload:
    """The trace as a workload (ConfigError, naming the file, on anything else)."""
    check_json_lines(path)
    if jsonl_kind(path)["kind"] == "trace":
        return read_trace(path)
    return agent_trace(path, None, None, 0, priors="online")
