"""`gateway.record` / `flowserve serve --record DIR`: every finished program and workflow
query as one JSON line of the agent-trace format (`flowserve.workloads.program_trace`),
which `flowserve simulate`, the α tuner and `bench compare` replay: record live, compare
policies in the simulator, serve the winner.

Each call keeps its stage, token counts, thread, the calls it followed and the client's
tool gap before it, and its prompt as prefix-chained block hashes (no token ids, no
text: the file shows how prompts share prefixes, not what they say). One-call OpenAI
requests outside a program are not recorded. A query the core failed (an agent that
gave up, a workflow error) is recorded with the calls it ran and `"failed"`: its kind.

Recording is a side feature: a write that fails (a full disk) is logged once, counted in
`flowserve_record_errors_total` and taken back (`LineFile`: the file stays whole JSON
lines); the query is answered as if nothing happened, and recording resumes when writes
succeed again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from flowserve.apps.single import SingleCall
from flowserve.errors import ConfigError
from flowserve.graph.plan import Segment
from flowserve.host.facts import CallSent, QueryEnded
from flowserve.host.query import QueryTicket
from flowserve.tune.segments import BlockIds
from flowserve.workloads.program_trace import RecordedCall, TracedQuery, query_json, traced_calls

log = logging.getLogger("flowserve.gateway")


class LineFile:
    """An append-only file of lines, each written whole or not at all: a write the disk
    cuts short is truncated away. `write` returns the OSError instead of raising it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    def write(self, line: str) -> OSError | None:
        data = memoryview(line.encode())
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as e:
            if done:
                with contextlib.suppress(OSError):  # frees space: it succeeds on a full disk
                    os.ftruncate(self._fd, self._size)
            return e
        self._size += done
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class QueryRecorder:
    def __init__(self, folder: str | Path, origin: float, scale: float = 1.0,
                 on_error: Callable[[], None] = lambda: None) -> None:
        """origin: the driver's clock when recording began (arrivals count from it);
        scale: engine seconds per second of that clock (`gateway.time_scale`: simulated
        engines run faster than real time), so the trace is in the cluster's time;
        on_error: counts a record that could not be written."""
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"trace-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
            self._file = LineFile(self.path)
        except OSError as e:
            raise ConfigError(f"gateway.record: cannot write to {str(folder)!r}: {e.strerror or e}") from None
        self.origin = origin
        self.scale = scale
        self.on_error = on_error
        self.failing = False  # since the last write failed (logged once, until a write succeeds)
        self.written = 0
        self._blocks = BlockIds()
        self._prompts: dict[int, dict[str, tuple[Segment, ...]]] = {}  # query → node → prompt shape

    @staticmethod
    def records(q: QueryTicket) -> bool:
        return q.factory != SingleCall.name

    def call_sent(self, fact: CallSent) -> None:
        """A call went to an engine: keep its prompt's shape (the last send, if retried)."""
        if fact.query is not None and self.records(fact.query):
            call = fact.call
            self._prompts.setdefault(call.query_id, {})[call.node] = self._blocks.chain(call.prompt)

    def query_ended(self, fact: QueryEnded) -> None:
        """A query ended (after its client got the answer: never in its way): a completed
        one is written, and one the core failed with the calls it ran (`"failed"`: its
        kind) — they loaded the engines as any other query's did, and a replay without them
        runs on an emptier cluster than the live run had."""
        h, done, failed = fact.query, fact.done, fact.failed
        prompts = self._prompts.pop(h.id, {})
        end = done or failed
        if end is None or not self.records(h):
            return
        output = done.output if done is not None and isinstance(done.output, dict) else {}
        steps = output.get("steps", {})
        calls = []
        for key, r in end.results.items():
            if r.instance is None or r.error is not None or r.finished is None:
                continue  # a tool step, or a call that failed or was cancelled
            prompt = prompts.get(key)
            n_in = sum(s.length for s in prompt) if prompt else r.prompt_tokens
            calls.append(RecordedCall(r.stage, steps.get(key, {}).get("thread"), self._t(r.ready or h.arrival),
                                      self._t(r.finished), n_in, r.output_tokens, prompt))
        if not calls:
            return
        traced = TracedQuery(traced_calls(calls, self._t(h.arrival)), round(self._t(h.arrival), 6), h.workflow,
                             None if h.slo_s is None else h.slo_s * self.scale)
        latency = done.latency if done is not None else end.time - h.arrival
        extra: dict[str, object] = {"id": h.id, "tenant": h.tenant, "latency_s": round(latency * self.scale, 6)}
        if steps:
            extra["program"] = output.get("program")
        if failed is not None:
            extra["failed"] = failed.kind.value
        self._write(json.dumps(query_json(traced, extra)) + "\n")

    def _write(self, line: str) -> None:
        error = self._file.write(line)
        if error is None:
            self.written += 1
            if self.failing:
                self.failing = False
                log.info("recording to %s works again", self.path)
            return
        self.on_error()
        if not self.failing:
            self.failing = True
            log.error("recording to %s failed: %s; the gateway serves on and drops the records it cannot write "
                      "(counted in flowserve_record_errors_total) until writes succeed again", self.path,
                      error.strerror or error)

    def _t(self, clock: float) -> float:
        return (clock - self.origin) * self.scale

    def close(self) -> None:
        self._file.close()
