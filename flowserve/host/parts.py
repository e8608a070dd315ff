"""Decode pipelining live: a call whose output is handed on part by part
(`LLMCall.streams_parts`) streams through a `PartSink`, which reads the text deltas as
they arrive (SSE chunks) and reports each complete part — a line, list markers
stripped, empty lines skipped, exactly as `graph.primitives.split_parts` cuts the whole
output — to the core as a `CallProgress` at once. The last part (no newline after it)
is completed from the finished output by the graph runtime."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowserve.engines.backend import TokenSink
from flowserve.graph.primitives import split_parts
from flowserve.types.events import CallProgress


class PartSink(TokenSink):
    """Forwards deltas to the client's sink (if any); emits a CallProgress per complete line."""

    def __init__(self, call_id: int, instance: str, clock: Callable[[], float], put: Callable[[Any], None],
                 client: TokenSink | None = None) -> None:
        super().__init__(lambda delta: None)
        self._call, self._instance, self._clock, self._emit = call_id, instance, clock, put
        self._client = client
        self._line = ""
        self._deltas = 0  # deltas (≈ tokens) since the last part
        self.parts = 0

    def push(self, delta: str) -> None:
        if not delta:
            return
        if self._client is not None:
            self._client.push(delta)
            self._follow(self._client)
        self._read(delta)

    def push_choice(self, choice: Mapping[str, Any]) -> None:
        if self._client is not None:
            self._client.push_choice(choice)
            self._follow(self._client)
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, Mapping) else choice.get("text")
        if isinstance(text, str) and text:
            self._read(text)

    def own(self, fields: Mapping[str, Any]) -> None:
        if self._client is not None:
            self._client.own(fields)

    def _follow(self, client: TokenSink) -> None:
        """What the client saw, this sink saw: its answer is committed with the client's."""
        self.sent = max(self.sent, client.sent)
        self.committed = self.committed or client.committed

    def _read(self, delta: str) -> None:
        self._deltas += 1
        *complete, self._line = (self._line + delta).split("\n")
        for line in complete:
            for part in split_parts(line):
                self._emit(CallProgress(self._clock(), self._call, self._instance, self.parts, self._deltas, part))
                self.parts += 1
                self.sent += 1
                self.committed = True  # successors may have read it: no transparent retry from here
                self._deltas = 0
