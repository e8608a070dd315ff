"""The agent's runs in the published trace format (`../shared/data/README.md`), so the
simulator can replay them (`kind: agent_trace`) and `flowserve calibrate` can compare.

One element per query: `{"Text2SQLRequest": [{"step", "input_length", "output_length"},
...]}` with the LLM calls in the order they finished (each step is the agent's stage).
Live measurements ride along as scalar fields the replay ignores: `question_id`,
`status`, `arrival_s` (after the run's first arrival), `latency_s`, and per call
`latency_s` (ready → finished) where known.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REQUEST_KEY = "Text2SQLRequest"
PARALLEL_STEPS = ("generate_candidate", "evaluate")  # what a replay runs side by side


def trace_entry(calls: Sequence[Mapping[str, Any]], *, question_id: str, status: str, arrival_s: float,
                latency_s: float) -> dict[str, Any]:
    """calls: `stage`, `prompt_tokens`, `output_tokens` and optionally `latency_s`."""
    steps = []
    for c in calls:
        step: dict[str, Any] = {"step": str(c["stage"]), "input_length": int(c["prompt_tokens"]),
                                "output_length": int(c["output_tokens"])}
        if c.get("latency_s") is not None:
            step["latency_s"] = round(float(c["latency_s"]), 6)
        steps.append(step)
    return {REQUEST_KEY: steps, "question_id": question_id, "status": status,
            "arrival_s": round(arrival_s, 6), "latency_s": round(latency_s, 6)}


def write_agent_trace(path: str | Path, entries: Iterable[Mapping[str, Any]]) -> int:
    """Write the entries that made LLM calls; returns how many."""
    kept = [dict(e) for e in entries if e.get(REQUEST_KEY)]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(kept, indent=1))
    return len(kept)
