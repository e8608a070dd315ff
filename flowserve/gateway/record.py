"""`gateway.record` / `flowserve serve --record DIR`: every finished program and workflow
query as one JSON line of the agent-trace format (`flowserve.workloads.program_trace`),
which `flowserve simulate`, the α tuner and `bench compare` replay: record live, compare
policies in the simulator, serve the winner.

Each call keeps its stage, token counts, thread, the calls it followed and the client's
tool gap before it, and its prompt as prefix-chained block hashes (no token ids, no
text: the file shows how prompts share prefixes, not what they say). One-call OpenAI
requests outside a program are not recorded; nor are failed queries.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO

from flowserve.apps.single import SingleCall
from flowserve.errors import ConfigError
from flowserve.gateway.query import QueryHandle
from flowserve.graph.plan import Segment
from flowserve.tune.segments import BlockIds
from flowserve.types.commands import QueryDone
from flowserve.types.work import LLMCall
from flowserve.workloads.program_trace import FinishedCall, TracedQuery, query_json, traced_calls


class QueryRecorder:
    def __init__(self, folder: str | Path, origin: float, scale: float = 1.0) -> None:
        """origin: the driver's clock when recording began (arrivals count from it);
        scale: engine seconds per second of that clock (`gateway.time_scale`: simulated
        engines run faster than real time), so the trace is in the cluster's time."""
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"trace-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
            self._file: IO[str] = self.path.open("a", buffering=1)  # a line reaches the file as it is written
        except OSError as e:
            raise ConfigError(f"gateway.record: cannot write to {str(folder)!r}: {e.strerror or e}") from None
        self.origin = origin
        self.scale = scale
        self.written = 0
        self._blocks = BlockIds()
        self._prompts: dict[tuple[int, str], tuple[Segment, ...]] = {}

    @staticmethod
    def records(h: QueryHandle) -> bool:
        return h.ref.name != SingleCall.name

    def sent(self, call: LLMCall) -> None:
        """A call went to an engine: keep its prompt's shape (the last send, if retried)."""
        self._prompts[(call.query_id, call.node)] = self._blocks.chain(call.prompt)

    def ended(self, h: QueryHandle, done: QueryDone | None) -> None:
        """A query ended; a completed one is written."""
        prompts = {node: self._prompts.pop((qid, node)) for qid, node in list(self._prompts) if qid == h.id}
        if done is None or h.arrival is None:
            return
        steps = done.output.get("steps", {}) if isinstance(done.output, dict) else {}
        calls = []
        for key, r in done.results.items():
            if r.instance is None or r.error is not None:
                continue  # a tool step, or a call that failed or was cancelled
            prompt = prompts.get(key)
            n_in = sum(s.length for s in prompt) if prompt else r.prompt_tokens
            calls.append(FinishedCall(r.stage, steps.get(key, {}).get("thread"), self._t(r.ready or h.arrival),
                                      self._t(r.finished or 0.0), n_in, r.output_tokens, prompt))
        if not calls:
            return
        traced = TracedQuery(traced_calls(calls, self._t(h.arrival)), round(self._t(h.arrival), 6), h.workflow,
                             None if h.slo_s is None else h.slo_s * self.scale)
        extra = {"id": h.id, "tenant": h.tenant, "latency_s": round(done.latency * self.scale, 6)}
        if steps:
            extra["program"] = done.output.get("program")
        self._file.write(json.dumps(query_json(traced, extra)) + "\n")
        self.written += 1

    def _t(self, clock: float) -> float:
        return (clock - self.origin) * self.scale

    def close(self) -> None:
        self._file.close()
